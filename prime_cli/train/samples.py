"""`prime train samples RUN_DIR --step N`: what the policy wrote at step N, rollout by rollout.

Read from `rollouts/step_N.jsonl` (every record the step saw, dropped and errored ones
included) and `batches/step_N/samples.jsonl` (the advantage each batched rollout trained
with), grouped by task: reward, the env's correctness metric, whether it was trained on, and
the completion.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prime_env.record import RolloutRecord
from trainer_bridge.orchestrator.hacking import completion_text, is_correct
from trainer_bridge.protocol.batches import SAMPLES_FILE
from trainer_bridge.protocol.run_dir import RunDir


class SamplesError(Exception):
    """The step's rollouts cannot be read; the message says why."""


def step_rollouts(run: RunDir, step: int) -> list[RolloutRecord]:
    path = run.rollouts(step)
    if not path.is_file():
        have = sorted(
            int(p.stem[5:]) for p in path.parent.glob("step_*.jsonl") if p.stem[5:].isdigit()
        )
        listed = ", ".join(map(str, have)) if have else "none yet"
        raise SamplesError(
            f"{run.root} has no rollouts for step {step} (steps with rollouts: {listed})"
        )
    records = []
    for line in path.read_text().splitlines():
        try:
            records.append(RolloutRecord.model_validate_json(line))
        except ValueError:
            continue  # a torn last line
    return records


def advantages(run: RunDir, step: int) -> dict[tuple[str, int], float]:
    """(task id, rollout index) → the advantage it was batched with."""
    path = run.batch(step) / SAMPLES_FILE
    out: dict[tuple[str, int], float] = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            sample = json.loads(line)
            out[(sample["task_id"], sample["rollout_index"])] = float(sample["advantage"])
    return out


def rows(run_dir: Path, step: int, correctness: str | None) -> list[dict[str, Any]]:
    """One row per rollout of the step, grouped by task (in the order the step saw them)."""
    run = RunDir(run_dir)
    trained = advantages(run, step)
    out = []
    for record in step_rollouts(run, step):
        key = (record.task_id, record.rollout_index)
        out.append(
            {
                "task_id": record.task_id,
                "rollout_index": record.rollout_index,
                "reward": record.reward,
                "correct": is_correct(record, correctness) if correctness else None,
                "advantage": trained.get(key),
                "error": record.error.type if record.error else None,
                "policy_version": record.policy_version,
                "completion": completion_text(record),
            }
        )
    order = {task: i for i, task in enumerate(dict.fromkeys(r["task_id"] for r in out))}
    return sorted(out, key=lambda r: (order[r["task_id"]], r["rollout_index"]))


def render(items: list[dict[str, Any]], width: int = 100) -> str:
    lines: list[str] = []
    task = None
    for item in items:
        if item["task_id"] != task:
            task = item["task_id"]
            lines.append(f"── {task}")
        reward = "error" if item["error"] else f"{item['reward']:.3g}"
        parts = [f"  #{item['rollout_index']:<3} reward {reward:<6}"]
        if item["correct"] is not None:
            parts.append("correct" if item["correct"] else "wrong  ")
        adv = item["advantage"]
        parts.append(f"adv {adv:+.3f}" if adv is not None else "not trained")
        if item["error"]:
            parts.append(item["error"])
        text = item["completion"].replace("\n", "⏎ ")
        lines.append(" ".join(parts) + f"  {text[:width]}")
    return "\n".join(lines)
