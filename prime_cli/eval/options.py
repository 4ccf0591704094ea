"""The options of the `prime eval` commands, defined once: `EvalOptions` is their schema, each
field one flag, and a command derives its click flags from the fields it names (as verifiers
derives its CLI from its config schema), then reads them back as one typed object.

    @eval_options(*MODEL, "n", "r", *CALLS, n={"default": -1})
    def cmd(**flags): opts = EvalOptions(**flags)

A command may change a field's default or help for itself (`validate` checks every task:
`-n -1`); the flag, its type and its bounds stay the schema's, so `-c`, `--timeout` or `-o`
read and are checked the same in every command, and what the values mean (the sampling
settings, the retry policy) is said once, below.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import click

from engines.choice import BACKENDS
from prime_cli.options import json_object
from prime_env.clients.model_specs import APIS
from prime_env.clients.retry import RetryPolicy

F = TypeVar("F", bound=Callable[..., Any])


def _click(flags: tuple[str, ...], **settings: Any) -> dict[str, Any]:
    """A schema field's metadata: its flags and how click reads it."""
    return {"flags": flags, "click": settings}


@dataclass(frozen=True)
class EvalOptions:
    """What the `prime eval` commands are told on their command line."""

    # the model: which, where it is served, with which key
    models: tuple[str, ...] = field(
        default=(),
        metadata=_click(
            ("-m", "--model"),
            multiple=True,
            help="provider/model, an endpoints.toml alias, a Hugging Face model directory (run "
            "in-process), or any name with --base-url (repeat to compare models). Default: "
            "openai/gpt-4.1-mini when OPENAI_API_KEY is set, else local/smollm2-135m.",
        ),
    )
    adapter: str | None = field(
        default=None,
        metadata=_click(
            ("--adapter",),
            help="a LoRA adapter to run on each -m (in-process models): a directory (prime "
            "train export), or OWNER/NAME[@VERSION] on the hub (downloaded, verified, cached)",
        ),
    )
    backend: str = field(
        default="auto",
        metadata=_click(
            ("--backend",),
            type=click.Choice(BACKENDS),
            show_default=True,
            help="the engine of in-process models (local/…, a model dir): torch, vllm (`prime "
            "engine install vllm`), or auto (vLLM on CUDA when installed, else torch)",
        ),
    )
    base_url: str | None = field(
        default=None,
        metadata=_click(
            ("-b", "--base-url"),
            help="a server to send -m NAME to (OpenAI-compatible unless --api says)",
        ),
    )
    api: str | None = field(
        default=None,
        metadata=_click(
            ("--api",),
            type=click.Choice(APIS),
            help="the API the server at -b URL speaks (default openai; anthropic: Messages API)",
        ),
    )
    api_key_var: str | None = field(
        default=None,
        metadata=_click(("-k", "--api-key-var"), help="environment variable holding the API key"),
    )
    endpoints: Path | None = field(
        default=None,
        metadata=_click(
            ("--endpoints",),
            type=click.Path(dir_okay=False, path_type=Path),
            help="endpoints.toml (default: ./endpoints.toml, ~/.config/prime/endpoints.toml)",
        ),
    )
    # the environment, and how much of it
    env_args: str | None = field(
        default=None,
        metadata=_click(("-a", "--env-args"), help="JSON object passed to load_environment"),
    )
    n: int = field(
        default=5,
        metadata=_click(("-n", "--num-examples"), type=int, help="tasks to evaluate (-1: all)"),
    )
    r: int = field(
        default=3, metadata=_click(("-r", "--rollouts-per-example"), type=click.IntRange(min=1))
    )
    # sampling
    sampling_args: str | None = field(
        default=None,
        metadata=_click(
            ("-S", "--sampling-args"),
            help="JSON object of sampling settings (provider extras pass through)",
        ),
    )
    max_tokens: int | None = field(
        default=None, metadata=_click(("-t", "--max-tokens"), type=click.IntRange(min=1))
    )
    temperature: float | None = field(
        default=None, metadata=_click(("-T", "--temperature"), type=click.FloatRange(min=0))
    )
    # how much at once, and how each model call is retried and bounded
    concurrency: int = field(
        default=32,
        metadata=_click(
            ("-c", "--max-concurrent"),
            type=click.IntRange(min=1),
            help="rollouts in flight per model",
        ),
    )
    workers: int = field(
        default=1,
        metadata=_click(
            ("-w", "--workers"),
            type=click.IntRange(min=1),
            help="processes per model sharing -c (more than one when one event loop is the limit)",
        ),
    )
    stream: bool = field(
        default=False, metadata=_click(("--stream/--no-stream",), help="stream responses (SSE)")
    )
    max_retries: int = field(
        default=5,
        metadata=_click(
            ("--max-retries",),
            type=click.IntRange(min=0),
            help="retries per model call for transport errors, timeouts, 429 and 5xx",
        ),
    )
    timeout_s: float = field(
        default=120.0,
        metadata=_click(
            ("--timeout",), type=click.FloatRange(min=0.1), help="seconds per model call"
        ),
    )
    # where the results go
    output_dir: Path = field(
        default=Path("outputs"),
        metadata=_click(
            ("-o", "--output-dir"),
            type=click.Path(file_okay=False, path_type=Path),
            help="where runs are written (and looked up by id)",
        ),
    )
    resume_dir: Path | None = field(
        default=None,
        metadata=_click(
            ("--resume",),
            type=click.Path(file_okay=False, path_type=Path),
            help="finish a run directory (same settings required): its missing rollouts and, "
            "unless --keep-errors, its errored ones again",
        ),
    )
    retry_errors: bool = field(
        default=True,
        metadata=_click(
            ("--retry-errors/--keep-errors",),
            show_default=True,
            help="with --resume: run the errored rollouts again (as Inspect's eval-retry), or "
            "keep them",
        ),
    )
    max_error_share: float = field(
        default=0.1,
        metadata=_click(
            ("--max-error-share",),
            type=click.FloatRange(min=0, max=1),
            help="exit 1 (and push nothing) when a larger share of a run's rollouts errored",
        ),
    )
    retries: int = field(
        default=2,
        metadata=_click(
            ("--retries",),
            type=click.IntRange(min=0),
            help="eval sets (several ENVs): reruns of a cell that crashed or holds errored rollouts",
        ),
    )
    push: bool = field(
        default=False,
        metadata=_click(("--push",), is_flag=True, help="upload the results to the hub"),
    )
    public: bool = field(
        default=False,
        metadata=_click(
            ("--public",), is_flag=True, help="with --push: make it public (leaderboard)"
        ),
    )

    def env_arguments(self) -> dict[str, Any]:
        """`-a` as the keyword arguments of load_environment."""
        return json_object(self.env_args, "--env-args")

    def sampling(self) -> dict[str, Any]:
        """`-S`, with `-t` and `-T` over it."""
        sampling = json_object(self.sampling_args, "--sampling-args")
        if self.max_tokens is not None:
            sampling["max_tokens"] = self.max_tokens
        if self.temperature is not None:
            sampling["temperature"] = self.temperature
        return sampling

    def sampling_given(self) -> bool:
        """Whether any sampling flag was given (a resume otherwise keeps the run's)."""
        return (
            bool(self.sampling_args) or self.max_tokens is not None or self.temperature is not None
        )

    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(max_attempts=self.max_retries + 1, timeout_s=self.timeout_s)


FIELDS = {f.name: f for f in dataclasses.fields(EvalOptions)}
MODEL = ("models", "adapter", "base_url", "api", "api_key_var", "endpoints")
SAMPLING = ("sampling_args", "max_tokens", "temperature")
CALLS = ("max_retries", "timeout_s")


def eval_options(*names: str, **changes: dict[str, Any]) -> Callable[[F], F]:
    """Decorate a command with the schema's fields `names`, in this order in its `--help`;
    `changes[name]` overrides that field's click settings (its `default`, its `help`)."""
    unknown = sorted((set(names) - set(FIELDS)) | (set(changes) - set(names)))
    if unknown:
        raise ValueError(f"not fields of EvalOptions (or not taken by the command): {unknown}")

    def decorate(command: F) -> F:
        for name in reversed(names):
            spec = FIELDS[name]
            settings = {
                "default": spec.default,
                **spec.metadata["click"],
                **changes.get(name, {}),
            }
            if settings["default"] not in (None, ()) and not isinstance(settings["default"], bool):
                settings["show_default"] = True
            command = click.option(*spec.metadata["flags"], name, **settings)(command)
        return command

    return decorate
