"""`prime train samples RUN_DIR --step N`: what the policy wrote at step N, rollout by rollout.

Read from `rollouts/step_N.jsonl` (every record the step saw, dropped and errored ones
included) and `batches/step_N/` (the advantage each batched rollout trained with, and the
stage's reward weights), grouped by task: the reward trained on and its parts (weight × score;
the env's own reward beside it when they differ), the env's correctness metric, whether it was
trained on, and the completion.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prime_env.record import RolloutRecord
from trainer_bridge.orchestrator.hacking import completion_text, is_correct
from trainer_bridge.orchestrator.rewards import training_reward
from trainer_bridge.protocol.batches import META_FILE, SAMPLES_FILE
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


def batched(run: RunDir, step: int) -> dict[tuple[str, int], dict[str, Any]]:
    """(task id, rollout index) → its sample's advantage and trained reward."""
    path = run.batch(step) / SAMPLES_FILE
    out: dict[tuple[str, int], dict[str, Any]] = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            sample = json.loads(line)
            out[(sample["task_id"], sample["rollout_index"])] = sample
    return out


def reward_weights(run: RunDir, step: int) -> dict[str, float] | None:
    """The weights the step's stage trained with (batch meta.json; None for a batch not
    written, or written before they were recorded)."""
    path = run.batch(step) / META_FILE
    if not path.is_file():
        return None
    weights = json.loads(path.read_text()).get("reward_weights")
    return {str(k): float(v) for k, v in weights.items()} if isinstance(weights, dict) else None


def _trained(
    record: RolloutRecord, weights: dict[str, float] | None, sample: dict[str, Any] | None
) -> tuple[float | None, dict[str, list[float]] | None]:
    """The reward trained on and its parts {name: [weight, score]} (weights != 0)."""
    if weights is None:
        reward = sample.get("reward") if sample else None
        return (float(reward) if isinstance(reward, (int, float)) else None), None
    scores = {**record.metrics, **record.rewards}
    parts = {name: [w, scores[name]] for name, w in weights.items() if w and name in scores}
    return training_reward(record, weights), parts


def rows(run_dir: Path, step: int, correctness: str | None) -> list[dict[str, Any]]:
    """One row per rollout of the step, grouped by task (in the order the step saw them)."""
    run = RunDir(run_dir)
    samples = batched(run, step)
    weights = reward_weights(run, step)
    out = []
    for record in step_rollouts(run, step):
        sample = samples.get((record.task_id, record.rollout_index))
        trained, parts = _trained(record, weights, sample) if record.error is None else (None, None)
        out.append(
            {
                "task_id": record.task_id,
                "rollout_index": record.rollout_index,
                "reward": record.reward,
                "trained_reward": trained,
                "reward_parts": parts,
                "correct": is_correct(record, correctness) if correctness else None,
                "advantage": float(sample["advantage"]) if sample else None,
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
        parts = [f"  #{item['rollout_index']:<3} {_reward(item)}"]
        if item["correct"] is not None:
            parts.append("correct" if item["correct"] else "wrong  ")
        adv = item["advantage"]
        parts.append(f"adv {adv:+.3f}" if adv is not None else "not trained")
        if item["error"]:
            parts.append(item["error"])
        text = item["completion"].replace("\n", "⏎ ")
        lines.append(" ".join(parts) + f"  {text[:width]}")
    return "\n".join(lines)


def _reward(item: dict[str, Any]) -> str:
    """`reward 0.5 (correct 1×0.5 + format 0.2×0)`, the env's reward beside it when the run
    re-weighted it (`orchestrator.reward.weights`)."""
    if item["error"]:
        return "reward error"
    trained, env = item["trained_reward"], item["reward"]
    if trained is None:
        return f"env reward {env:.3g}" if env is not None else "reward -"
    text = f"reward {trained:.3g}"
    if item["reward_parts"]:
        parts = " + ".join(f"{n} {w:g}×{v:.3g}" for n, (w, v) in item["reward_parts"].items())
        text += f" ({parts})"
    if env is not None and abs(env - trained) > 1e-9:
        text += f" [env reward {env:.3g}]"
    return text
