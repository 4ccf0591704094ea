"""Orchestrator checkpoints and resume: `checkpoints/step_N/{trainer,orchestrator}/` + `STABLE`.

Step N means "batches 0..N-1 are trained, policy N exists". The trainer writes `trainer/` (its
weights, optimizer, scheduler and RNG, with its own STABLE); the orchestrator writes
`orchestrator/state.json` (next step, task cursor, RNG, policy version, config digest) and then
the step's `STABLE` — last, so a crash at any moment leaves either a complete checkpoint or one
that resume ignores (prime-rl#1712, #1825). Older complete checkpoints beyond `keep_last` go.
"""

from __future__ import annotations

import json
import random
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from trainer_bridge.protocol.run_dir import RunDir, write_json_atomic
from trainer_bridge.protocol.stable import MARKER, is_stable, stable_steps
from trainer_bridge.protocol.stable import prune as prune_steps

STATE = "state.json"


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


def trainer_part(run: RunDir, step: int) -> Path:
    return run.checkpoint(step) / "trainer"


def orchestrator_part(run: RunDir, step: int) -> Path:
    return run.checkpoint(step) / "orchestrator"


def save(run: RunDir, state: OrchestratorState, keep_last: int | None) -> Path:
    """Write the orchestrator half of step `state.step`; mark the step STABLE once the trainer's
    half is complete too. Returns the checkpoint directory."""
    directory = run.checkpoint(state.step)
    write_json_atomic(orchestrator_part(run, state.step) / STATE, state.to_json())
    if is_stable(trainer_part(run, state.step)):
        mark_stable(directory)
        prune(run, keep_last)
    return directory


def complete(run: RunDir, step: int) -> bool:
    """Mark step STABLE if both halves are there (the trainer may finish its half later)."""
    directory = run.checkpoint(step)
    if is_stable(directory):
        return True
    if (orchestrator_part(run, step) / STATE).is_file() and is_stable(trainer_part(run, step)):
        mark_stable(directory)
        return True
    return False


def mark_stable(directory: Path) -> None:
    """The step's marker, written once both halves are complete (atomically, like stable.py)."""
    tmp = directory / f".{MARKER}.tmp"
    tmp.write_text("")
    tmp.replace(directory / MARKER)


def prune(run: RunDir, keep_last: int | None) -> None:
    if keep_last is not None:
        prune_steps(run.root / "checkpoints", keep_last)


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


def discard_after(run: RunDir, step: int) -> None:
    """Remove what steps ≥ `step` left behind (batches, broadcasts > step, partial checkpoints,
    rollouts, evals, metrics lines) so the resumed run writes each step exactly once."""
    for parent, first in (("batches", step), ("broadcasts", step + 1), ("checkpoints", step + 1)):
        base = run.root / parent
        if not base.is_dir():
            continue
        for child in base.iterdir():
            number = child.name.removeprefix("step_")
            if number.isdigit() and int(number) >= first:
                shutil.rmtree(child, ignore_errors=True)
    rollouts = run.root / "rollouts"
    if rollouts.is_dir():
        for child in rollouts.glob("step_*.jsonl"):
            if child.stem[5:].isdigit() and int(child.stem[5:]) >= step:
                child.unlink()
    evals = run.root / "evals"
    if evals.is_dir():
        for child in evals.iterdir():
            if child.name[5:].isdigit() and int(child.name[5:]) > step:
                shutil.rmtree(child, ignore_errors=True)
    if run.metrics.is_file():
        kept = []
        for line in run.metrics.read_text().splitlines():
            try:
                if int(json.loads(line)["step"]) < step:
                    kept.append(line)
            except (ValueError, KeyError, TypeError):
                continue  # a torn last line
        tmp = run.metrics.with_name(".metrics.jsonl.tmp")
        tmp.write_text("".join(line + "\n" for line in kept))
        tmp.replace(run.metrics)
