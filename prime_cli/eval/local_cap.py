"""The per-turn token cap `prime eval` commands give in-process models when none is asked for."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from engines.choice import runs_in_process
from prime_env.clients.model_specs import ModelSpec

LOCAL_MAX_TOKENS = 256
"""Per-turn token cap for a model run on this CPU when none is given: SmolLM2-135M rarely needs
more for these tasks, and uncapped it can ramble for minutes per rollout."""


def cap_local_tokens(specs: list[ModelSpec], sampling: dict[str, Any], console: Console) -> None:
    """Cap `sampling` at LOCAL_MAX_TOKENS when every model runs in this process and no
    max_tokens was given, and say so on `console`."""
    if "max_tokens" in sampling or not all(runs_in_process(spec) for spec in specs):
        return
    sampling["max_tokens"] = LOCAL_MAX_TOKENS
    console.print(
        f"{', '.join(spec.name for spec in specs)} runs on this CPU: each turn is capped at "
        f"{LOCAL_MAX_TOKENS} tokens (pass -t N to change)"
    )
