"""From a model string to a ModelClient.

Accepted forms (what vf-eval and prime users type):
- `provider/model`: `openai/gpt-4.1-mini`, `anthropic/claude-sonnet-4-5`, `openrouter/<org>/<model>`,
  `together/…`, `deepseek/…`, `gemini/…` (Gemini's OpenAI-compatible endpoint), `prime/…`;
- `local/smollm2-135m`: a model run in this process, by a provider registered under the
  `prime.model_providers` entry-point group (`local` is local_model's, the SDK's `local` extra);
- a Hugging Face model directory (`./my-policy`, `/models/x`): run in this process by `local`;
- any in-process model with `+ADAPTER_DIR` (what `--adapter DIR` writes): a LoRA adapter on it;
- an alias from `endpoints.toml` (./endpoints.toml, else ~/.config/prime/endpoints.toml);
- any name together with `--base-url URL` (vLLM, a proxy, a self-hosted server), spoken to
  as OpenAI chat completions or, with `--api anthropic`, as Anthropic Messages;
- `reference`: the environment's own reference policy (prime_env.reference), which needs the
  environment to make its client.

`OPENAI_BASE_URL` and `ANTHROPIC_BASE_URL` are honoured as the providers' SDKs honour them:
`openai/<model>` and `anthropic/<model>` go there instead of the public APIs.

Keys are read from environment variables only, at client creation, and never stored on the
spec, so nothing that serialises a spec (metadata.json, logs) can leak one.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from dataclasses import dataclass, replace
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from prime_env.clients.base import ModelClient
from prime_env.clients.model_paths import (
    ADAPTER_CONFIG,
    check_adapter_dir,
    check_model_dir,
    looks_like_path,
)
from prime_env.clients.retry import RetryPolicy
from prime_env.errors import ModelConfigError
from registry_index.toml_text import TomlError, parse_toml

if TYPE_CHECKING:
    from prime_env.clients.sdk_client import SDKClient

DEFAULT_LOCAL_MODEL = "local/smollm2-135m"
PATH_PROVIDER = "local"
"""The in-process provider that runs `-m DIR` (a Hugging Face model directory)."""
DEFAULT_HOSTED_MODEL = "openai/gpt-4.1-mini"
PROVIDER_GROUP = "prime.model_providers"
REFERENCE_MODEL = "reference"
"""The model name of reference rollouts (`-m reference`, the `model` of their records)."""


class PlaysReference(Protocol):
    """An environment that can play its own reference policy (prime_env.Environment)."""

    def reference_client(self) -> ModelClient: ...


@dataclass(frozen=True)
class Provider:
    base_url: str
    key_var: str
    client: str = "openai"


APIS = ("openai", "anthropic")
"""The wire formats a server at a URL may speak (`--api`)."""

BASE_URL_VARS = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL"}
"""The variables the providers' SDKs read their base URL from; we read them the same way."""

PROVIDERS: dict[str, Provider] = {
    "openai": Provider("https://api.openai.com/v1", "OPENAI_API_KEY"),
    "anthropic": Provider("https://api.anthropic.com", "ANTHROPIC_API_KEY", "anthropic"),
    "openrouter": Provider("https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
    "together": Provider("https://api.together.xyz/v1", "TOGETHER_API_KEY"),
    "deepseek": Provider("https://api.deepseek.com/v1", "DEEPSEEK_API_KEY"),
    "gemini": Provider("https://generativelanguage.googleapis.com/v1beta/openai", "GEMINI_API_KEY"),
    "prime": Provider("https://api.pinference.ai/api/v1", "PRIME_API_KEY"),
}


class ModelProvider(Protocol):
    """Models run in this process, registered as `[project.entry-points."prime.model_providers"]
    local = "local_model.provider:PROVIDER"`: `local/<name>` is then one of them. The SDK knows
    nothing of how they run (torch stays out of it); listing them must import nothing heavy."""

    def models(self) -> Collection[str]:
        """The names accepted after `<provider>/`."""
        ...

    def create_client(self, model: str, adapter: str | None = None) -> ModelClient:
        """A client for `model` (one of `models()`, or for `local` a model directory's absolute
        path), with the LoRA adapter directory `adapter` on it when given; may import the
        provider's engine."""
        ...


@cache
def _registered() -> dict[str, metadata.EntryPoint]:
    return {ep.name: ep for ep in metadata.entry_points(group=PROVIDER_GROUP)}


def in_process_provider(name: str) -> ModelProvider | None:
    """The provider registered under `name` in `prime.model_providers`, or None."""
    entry = _registered().get(name)
    if entry is None:
        return None
    provider: ModelProvider = entry.load()
    return provider


PRICES_PER_MTOK: dict[str, tuple[float, float]] = {
    # (input, output) USD per million tokens, from the providers' public price lists.
    "openai/gpt-4.1": (2.00, 8.00),
    "openai/gpt-4.1-mini": (0.40, 1.60),
    "openai/gpt-4.1-nano": (0.10, 0.40),
    "openai/gpt-4o": (2.50, 10.00),
    "openai/gpt-4o-mini": (0.15, 0.60),
    "anthropic/claude-sonnet-4-5": (3.00, 15.00),
    "anthropic/claude-haiku-4-5": (1.00, 5.00),
    "anthropic/claude-opus-4-1": (15.00, 75.00),
    "deepseek/deepseek-chat": (0.27, 1.10),
}


@dataclass(frozen=True)
class ModelSpec:
    """A resolved model: everything needed to build its client, minus the secret."""

    name: str  # what the user asked for; used in result paths and tables
    model: str  # the id sent to the provider
    provider: str
    client: str  # "openai" | "anthropic" | an in-process provider's name ("local")
    base_url: str | None
    key_var: str | None
    price_per_mtok: tuple[float, float] | None = None
    adapter: str | None = None  # a LoRA adapter directory on an in-process model

    def describe(self) -> dict[str, Any]:
        """What metadata.json records about the model (no key, only the variable's name)."""
        return {
            "name": self.name,
            "model": self.model,
            "provider": self.provider,
            "client": self.client,
            "base_url": self.base_url,
            "api_key_var": self.key_var,
            "adapter": self.adapter,
        }

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        if self.price_per_mtok is None:
            return None
        price_in, price_out = self.price_per_mtok
        return (prompt_tokens * price_in + completion_tokens * price_out) / 1e6

    def api_key(self) -> str | None:
        if self.key_var is None:
            return None
        key = os.environ.get(self.key_var)
        if not key:
            raise ModelConfigError(
                f"{self.key_var} is not set: export {self.key_var}=<your key> to use {self.name}, "
                f"or pass --api-key-var NAME to read the key from another variable"
            )
        return key or None

    def create_client(
        self,
        *,
        stream: bool = False,
        policy: RetryPolicy | None = None,
        env: PlaysReference | None = None,
    ) -> ModelClient:
        """The client; `env` is the environment being run (only `reference` needs it)."""
        if self.client == REFERENCE_MODEL:
            if env is None:
                raise ModelConfigError("-m reference plays an environment's own policy: give env=")
            return env.reference_client()
        if self.client not in ("openai", "anthropic"):
            provider = in_process_provider(self.client)
            if provider is None:
                raise ModelConfigError(f"no model provider {self.client!r} is installed")
            if self.adapter is not None:
                return provider.create_client(self.model, adapter=self.adapter)
            return provider.create_client(self.model)
        sdk: type[SDKClient]  # imported when asked for: each SDK takes a while to import
        if self.client == "anthropic":
            from prime_env.clients.anthropic_client import AnthropicClient

            sdk = AnthropicClient
        else:
            from prime_env.clients.openai_client import OpenAIClient

            sdk = OpenAIClient
        return sdk(
            self.model,
            base_url=self.base_url,
            api_key=self.api_key(),
            provider=self.provider,
            stream=stream,
            policy=policy,
        )


def endpoints_file(cwd: Path | None = None) -> Path | None:
    """./endpoints.toml, else ~/.config/prime/endpoints.toml, else None."""
    for candidate in (
        (cwd or Path.cwd()) / "endpoints.toml",
        Path.home() / ".config" / "prime" / "endpoints.toml",
    ):
        if candidate.is_file():
            return candidate
    return None


def load_endpoints(path: Path) -> dict[str, dict[str, Any]]:
    """Aliases from an endpoints file.

    Our form is one table per alias: `[alias] url, key_var, client = "openai"|"anthropic",
    model, price_in, price_out`. verifiers' `[[endpoint]] endpoint_id, model, url, key,
    api_client_type` form is accepted too, so an existing configs/endpoints.toml works.
    """
    try:
        data = parse_toml(path.read_bytes(), "it")
    except (OSError, TomlError) as exc:
        raise ModelConfigError(f"cannot read endpoints file {path}: {exc}") from None
    aliases: dict[str, dict[str, Any]] = {}
    for entry in data.pop("endpoint", []):
        client = str(entry.get("api_client_type", "openai"))
        aliases.setdefault(
            entry["endpoint_id"],
            {
                "url": entry.get("url"),
                "key_var": entry.get("key"),
                "model": entry.get("model"),
                "client": "anthropic" if client.startswith("anthropic") else "openai",
            },
        )
    for alias, entry in data.items():
        if isinstance(entry, dict):
            aliases[alias] = entry
    for alias, entry in aliases.items():
        if not entry.get("url"):
            raise ModelConfigError(f"{path}: endpoint {alias!r} has no url")
        if entry.get("client", "openai") not in ("openai", "anthropic"):
            raise ModelConfigError(
                f"{path}: endpoint {alias!r} has client={entry['client']!r}; use openai or anthropic"
            )
    return aliases


def resolve_model(
    name: str,
    *,
    base_url: str | None = None,
    api_key_var: str | None = None,
    endpoints: Path | None = None,
    api: str | None = None,
) -> ModelSpec:
    """Turn what the user typed into a ModelSpec, or raise ModelConfigError saying why not.

    `api` ("openai" | "anthropic") is the wire format of the server at `base_url`; without a
    `base_url` it takes that API's base-URL variable (OPENAI_BASE_URL, ANTHROPIC_BASE_URL)."""
    name = name.strip()
    if not name:
        raise ModelConfigError(
            "empty model name; pass -m provider/model, e.g. -m openai/gpt-4.1-mini"
        )
    if api is not None:
        if api not in APIS:
            raise ModelConfigError(f"--api {api!r}: use one of {', '.join(APIS)}")
        base_url = base_url or os.environ.get(BASE_URL_VARS[api])
        if not base_url:
            raise ModelConfigError(
                f"--api {api} names the wire format of a server: give its URL with -b URL "
                f"(or set {BASE_URL_VARS[api]})"
            )
    base_name, adapter = split_adapter(name)
    if base_url:
        if adapter is not None:
            raise ModelConfigError(
                "--adapter runs a LoRA adapter in this process; a server at -b URL loads its "
                "adapters itself (vLLM: --lora-modules NAME=DIR), then pass -m NAME"
            )
        return ModelSpec(name, name, "custom", api or "openai", base_url.rstrip("/"), api_key_var)
    if name == REFERENCE_MODEL:  # reserved: no alias or provider is asked
        ref = REFERENCE_MODEL
        return ModelSpec(ref, ref, ref, ref, None, None, (0.0, 0.0))
    if adapter is not None:
        base = resolve_model(base_name, endpoints=endpoints)
        if base.base_url is not None or in_process_provider(base.client) is None:
            raise ModelConfigError(
                f"--adapter needs a model run in this process (-m local/… or -m DIR), not "
                f"{base_name}; a server loads its adapters itself, then pass -m ADAPTER_NAME"
            )
        return replace(base, name=name, adapter=adapter)
    if looks_like_path(name) or Path(name).expanduser().is_dir():
        if in_process_provider(PATH_PROVIDER) is None:
            raise ModelConfigError(
                f"-m {name}: a model directory runs in this process, which needs the local "
                "model engine: pip install 'prime-envhub-sdk[local]'"
            )
        directory = check_model_dir(Path(name))
        return ModelSpec(name, str(directory), PATH_PROVIDER, PATH_PROVIDER, None, None, (0.0, 0.0))
    path = endpoints or endpoints_file()
    if path is not None:
        aliases = load_endpoints(path)
        if name in aliases:
            entry = aliases[name]
            price = (
                (float(entry["price_in"]), float(entry["price_out"]))
                if "price_in" in entry and "price_out" in entry
                else None
            )
            return ModelSpec(
                name,
                str(entry.get("model") or name),
                name,
                str(entry.get("client", "openai")),
                str(entry["url"]).rstrip("/"),
                api_key_var or entry.get("key_var"),
                price,
            )
    provider, sep, model = name.partition("/")
    in_process = in_process_provider(provider) if sep and provider not in PROVIDERS else None
    if in_process is not None:
        if model not in in_process.models():
            raise ModelConfigError(
                f"unknown {provider} model {model!r}; available: "
                + ", ".join(f"{provider}/{m}" for m in sorted(in_process.models()))
            )
        # Run in this process: no key, no endpoint, nothing to pay.
        return ModelSpec(name, model, provider, provider, None, None, (0.0, 0.0))
    if not sep or provider not in PROVIDERS or not model:
        hint = _provider_hint(name)
        raise ModelConfigError(
            f"cannot tell which provider serves {name!r}"
            + (f": did you mean -m {hint}? Otherwise use" if hint else ": use")
            + " provider/model with provider one of "
            f"{', '.join(sorted([*PROVIDERS, *_registered()]))}, an alias from endpoints.toml, "
            "--base-url URL for any OpenAI-compatible server, or reference for the "
            "environment's own reference policy"
        )
    known = PROVIDERS[provider]
    return ModelSpec(
        name,
        model,
        provider,
        known.client,
        (os.environ.get(BASE_URL_VARS.get(provider, "")) or known.base_url).rstrip("/"),
        api_key_var or known.key_var,
        PRICES_PER_MTOK.get(name),
    )


_NAME_PREFIXES = {"gpt-": "openai", "o1": "openai", "o3": "openai", "o4": "openai",
                  "chatgpt-": "openai", "claude-": "anthropic", "gemini-": "gemini",
                  "deepseek-": "deepseek"}  # fmt: skip
"""Model-name beginnings that say which provider's model it is (for the hint only)."""


def _provider_hint(name: str) -> str:
    """`openai/gpt-4.1-mini (OPENAI_BASE_URL is set)` for a bare model name whose provider is plain
    (a priced model, a known name prefix, or the one provider whose variables are set)."""
    if "/" in name or not name:
        return ""
    priced = [p for p in PROVIDERS if f"{p}/{name}" in PRICES_PER_MTOK]
    by_prefix = [p for prefix, p in _NAME_PREFIXES.items() if name.startswith(prefix)]
    configured = [
        p
        for p, known in PROVIDERS.items()
        if os.environ.get(BASE_URL_VARS.get(p, "")) or os.environ.get(known.key_var)
    ]
    for found in (priced, by_prefix, configured):
        if len(found) == 1:
            provider = found[0]
            why = [v for v in (BASE_URL_VARS.get(provider), PROVIDERS[provider].key_var)
                   if v and os.environ.get(v)]  # fmt: skip
            set_note = (
                f" ({' and '.join(why)} {'are' if len(why) > 1 else 'is'} set)" if why else ""
            )
            return f"{provider}/{name}{set_note}"
    return ""


def split_adapter(name: str) -> tuple[str, str | None]:
    """`BASE+ADAPTER_DIR` (what `--adapter DIR` makes of `-m BASE`) -> (BASE, the adapter's
    absolute path); any other name -> (name, None)."""
    base, plus, adapter = name.rpartition("+")
    if not plus or not base or not adapter:
        return name, None
    if not (Path(adapter).expanduser() / ADAPTER_CONFIG).is_file():
        return name, None
    return base, str(check_adapter_dir(Path(adapter)))


def default_model() -> str:
    """The model used when none is given: a hosted default if its key is set, else local."""
    return DEFAULT_HOSTED_MODEL if os.environ.get("OPENAI_API_KEY") else DEFAULT_LOCAL_MODEL
