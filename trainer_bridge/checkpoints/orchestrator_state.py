"""The orchestrator's half of a checkpoint: `checkpoints/step_N/orchestrator/state.json`.

It holds what the orchestrator needs to continue exactly where step N begins (next step, task
cursor, RNG, policy version, config digest, counters). Written after the trainer's half may
already be there; the step's `STABLE` follows once both are (checkpoints/layout.py).
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from registry_index.files import write_json_atomic
from trainer_bridge.checkpoints.layout import (
    STATE,
    mark_stable,
    orchestrator_part,
    prune,
    trainer_part,
)
from trainer_bridge.protocol.run_dir import RunDir
from trainer_bridge.protocol.stable import is_stable, stable_steps


class ResumeError(RuntimeError):
    """The run cannot be resumed; the message says why."""


@dataclass
class OrchestratorState:
    """What the orchestrator needs to continue exactly where step `step` begins."""

    step: int
    task_cursor: int
    rng_state: Any
    policy_version: int
    config_digest: str
    counters: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> OrchestratorState:
        return cls(
            step=int(data["step"]),
            task_cursor=int(data["task_cursor"]),
            rng_state=data["rng_state"],
            policy_version=int(data["policy_version"]),
            config_digest=str(data["config_digest"]),
            counters={str(k): int(v) for k, v in (data.get("counters") or {}).items()},
        )


def rng_to_json(rng: random.Random) -> Any:
    version, internal, gauss = rng.getstate()
    return [version, list(internal), gauss]


def rng_from_json(state: Any) -> random.Random:
    rng = random.Random()
    version, internal, gauss = state
    rng.setstate((version, tuple(internal), gauss))
    return rng


def save(run: RunDir, state: OrchestratorState, keep_last: int | None) -> Path:
    """Write the orchestrator half of step `state.step`; mark the step STABLE once the trainer's
    half is complete too. Returns the checkpoint directory."""
    directory = run.checkpoint(state.step)
    write_json_atomic(orchestrator_part(run, state.step) / STATE, state.to_json())
    if is_stable(trainer_part(run, state.step)):
        mark_stable(directory)
        prune(run, keep_last)
    return directory


def latest(run: RunDir) -> OrchestratorState | None:
    """The newest STABLE checkpoint's orchestrator state, or None when there is none."""
    steps = stable_steps(run.root / "checkpoints")
    if not steps:
        return None
    path = orchestrator_part(run, steps[-1]) / STATE
    try:
        return OrchestratorState.from_json(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ResumeError(f"checkpoint {path} is unreadable: {exc}") from None
