"""The token cap `prime eval` gives in-process models: set and said only when nothing was asked."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from prime_cli.eval.local_cap import LOCAL_MAX_TOKENS, cap_local_tokens
from prime_env.clients.model_specs import ModelSpec

LOCAL = ModelSpec("local/smollm2-135m", "smollm2-135m", "local", "local", None, None)
HOSTED = ModelSpec(
    "openai/gpt-4.1-mini", "gpt-4.1-mini", "openai", "openai", None, "OPENAI_API_KEY"
)


def _cap(specs: list[ModelSpec], sampling: dict[str, Any]) -> str:
    out = io.StringIO()
    cap_local_tokens(specs, sampling, Console(file=out, width=200))
    return out.getvalue()


def test_a_cpu_model_without_max_tokens_is_capped_and_told_so() -> None:
    sampling: dict[str, Any] = {}
    said = _cap([LOCAL], sampling)
    assert sampling == {"max_tokens": LOCAL_MAX_TOKENS}
    assert f"each turn is capped at {LOCAL_MAX_TOKENS} tokens (pass -t N" in said


def test_an_asked_cap_or_a_hosted_model_is_left_alone() -> None:
    asked: dict[str, Any] = {"max_tokens": 32}
    assert _cap([LOCAL], asked) == "" and asked == {"max_tokens": 32}
    mixed: dict[str, Any] = {}
    assert _cap([LOCAL, HOSTED], mixed) == "" and mixed == {}
