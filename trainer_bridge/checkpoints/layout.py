"""Checkpoint layout: `checkpoints/step_N/{trainer,orchestrator}/` + `STABLE`, and resume's clean-up.

Step N means "batches 0..N-1 are trained, policy N exists". The trainer writes `trainer/` (its
weights, optimizer, scheduler and RNG, with its own STABLE: trainer_state.py); the orchestrator
writes `orchestrator/state.json` (orchestrator_state.py) and then the step's `STABLE` — last, so a crash at any moment leaves either a complete checkpoint or one
that resume ignores (prime-rl#1712, #1825). Older complete checkpoints beyond `keep_last` go.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from trainer_bridge.protocol.run_dir import RunDir
from trainer_bridge.protocol.stable import MARKER, is_stable
from trainer_bridge.protocol.stable import prune as prune_steps

STATE = "state.json"
"""The orchestrator's half: `orchestrator/state.json` (checkpoints/orchestrator_state.py)."""


def trainer_part(run: RunDir, step: int) -> Path:
    return run.checkpoint(step) / "trainer"


def orchestrator_part(run: RunDir, step: int) -> Path:
    return run.checkpoint(step) / "orchestrator"


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
