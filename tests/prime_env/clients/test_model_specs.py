"""Model strings, endpoint aliases and API keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from prime_env.clients.anthropic_client import AnthropicClient
from prime_env.clients.model_specs import (
    BASE_URL_VARS,
    PROVIDERS,
    ModelConfigError,
    default_model,
    resolve_model,
)
from prime_env.clients.openai_client import OpenAIClient


def test_provider_prefixes() -> None:
    spec = resolve_model("openai/gpt-4.1-mini", endpoints=None)
    assert (spec.provider, spec.model, spec.key_var) == ("openai", "gpt-4.1-mini", "OPENAI_API_KEY")
    assert spec.cost(1_000_000, 1_000_000) == pytest.approx(2.0)
    router = resolve_model("openrouter/meta-llama/llama-3-8b")
    assert (
        router.model == "meta-llama/llama-3-8b"
        and router.base_url == "https://openrouter.ai/api/v1"
    )
    assert resolve_model("anthropic/claude-sonnet-4-5").client == "anthropic"
    assert str(resolve_model("gemini/gemini-2.5-flash").base_url).endswith("/v1beta/openai")
    assert resolve_model("local/smollm2-135m").client == "local"


def test_base_url_takes_any_name() -> None:
    spec = resolve_model("Qwen/Qwen3-8B", base_url="http://127.0.0.1:8000/v1/")
    assert (spec.model, spec.base_url, spec.key_var) == (
        "Qwen/Qwen3-8B",
        "http://127.0.0.1:8000/v1",
        None,
    )


@pytest.mark.parametrize("bad", ["gpt-4", "nosuch/model", "openai/", "local/gpt-9"])
def test_unknown_models_say_how_to_fix(bad: str) -> None:
    with pytest.raises(ModelConfigError) as info:
        resolve_model(bad)
    assert "--base-url" in str(info.value) or "available" in str(info.value)


def test_missing_key_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ModelConfigError, match="ANTHROPIC_API_KEY is not set"):
        resolve_model("anthropic/claude-sonnet-4-5").create_client()


def test_keys_come_from_the_named_variable_and_never_into_describe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MY_KEY", "sk-secret-value-123")
    spec = resolve_model("openai/gpt-4.1-mini", api_key_var="MY_KEY")
    client = spec.create_client()
    assert isinstance(client, OpenAIClient) and client._client.api_key == "sk-secret-value-123"
    assert "sk-secret-value-123" not in repr(spec.describe()) + repr(spec)


def test_endpoints_file_both_formats(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "endpoints.toml"
    path.write_text(
        '[my-vllm]\nurl = "http://127.0.0.1:9/v1"\nmodel = "Qwen/Qwen3-8B"\n'
        "price_in = 0.1\nprice_out = 0.2\n\n"
        '[[endpoint]]\nendpoint_id = "claude"\nmodel = "claude-x"\nurl = "http://127.0.0.1:9"\n'
        'key = "CLAUDE_KEY"\napi_client_type = "anthropic_messages"\n'
    )
    vllm = resolve_model("my-vllm", endpoints=path)
    assert (vllm.model, vllm.base_url, vllm.client) == (
        "Qwen/Qwen3-8B",
        "http://127.0.0.1:9/v1",
        "openai",
    )
    assert vllm.cost(10**6, 0) == pytest.approx(0.1)
    monkeypatch.setenv("CLAUDE_KEY", "k" * 10)
    claude = resolve_model("claude", endpoints=path)
    assert isinstance(claude.create_client(), AnthropicClient) and claude.model == "claude-x"
    monkeypatch.chdir(tmp_path)  # found in the working directory without --endpoints
    assert resolve_model("my-vllm").base_url == "http://127.0.0.1:9/v1"


def test_bad_endpoints_file(tmp_path: Path) -> None:
    path = tmp_path / "endpoints.toml"
    path.write_text("[x]\nclient = 'grpc'\nurl = 'http://h'\n")
    with pytest.raises(ModelConfigError, match="use openai or anthropic"):
        resolve_model("x", endpoints=path)
    path.write_text("[x\n")
    with pytest.raises(ModelConfigError, match="cannot read endpoints file"):
        resolve_model("x", endpoints=path)


def test_default_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert default_model() == "local/smollm2-135m"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    assert default_model() == "openai/gpt-4.1-mini"


@pytest.mark.parametrize("base", ["reference", "openai/gpt-4.1-mini"])
def test_an_adapter_needs_a_model_run_in_this_process(base: str, tmp_path: Path) -> None:
    (tmp_path / "adapter_config.json").write_text("{}")
    with pytest.raises(ModelConfigError, match="--adapter needs a model run in this process"):
        resolve_model(f"{base}+{tmp_path}", endpoints=None)
    on_local = resolve_model(f"local/smollm2-135m+{tmp_path}", endpoints=None)
    assert (on_local.client, on_local.adapter) == ("local", str(tmp_path.resolve()))


def test_a_bare_model_name_is_refused_with_the_provider_it_most_likely_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`-m gpt-4.1-mini` with OPENAI_BASE_URL set says `openai/gpt-4.1-mini`; a name nothing
    points at gets no guess."""
    for var in [*BASE_URL_VARS.values(), *(p.key_var for p in PROVIDERS.values())]:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    with pytest.raises(ModelConfigError) as priced:
        resolve_model("gpt-4.1-mini")
    assert "did you mean -m openai/gpt-4.1-mini (OPENAI_BASE_URL is set)?" in str(priced.value)
    with pytest.raises(ModelConfigError) as prefixed:
        resolve_model("claude-sonnet-9")
    assert "did you mean -m anthropic/claude-sonnet-9?" in str(prefixed.value)
    with pytest.raises(ModelConfigError) as configured:
        resolve_model("my-finetune")  # only OpenAI's variables are set: its server, likely
    assert "did you mean -m openai/my-finetune (OPENAI_BASE_URL is set)?" in str(configured.value)
    monkeypatch.delenv("OPENAI_BASE_URL")
    with pytest.raises(ModelConfigError) as unknown:
        resolve_model("my-finetune")
    assert "did you mean" not in str(unknown.value)
