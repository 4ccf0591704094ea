"""One metrics line per step: the orchestrator's half from its StepStats, the trainer's read back.

The trainer appends its line to `trainer_metrics.jsonl` just after the step's broadcast; the
orchestrator waits briefly for it and writes both halves as one `metrics.jsonl` row.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

from trainer_bridge.config import Stage
from trainer_bridge.metrics import mean
from trainer_bridge.orchestrator.batches import StepStats
from trainer_bridge.orchestrator.hacking import hacking_metrics
from trainer_bridge.protocol.run_dir import RunDir
from trainer_bridge.usage import cpu_seconds, peak_rss_mb, tree_cpu_seconds

TRAINER_LINE_WAIT_S = 10.0


class StepMetrics:
    """Builds the step rows; the run's elapsed and CPU time count from its construction."""

    def __init__(self, run: RunDir) -> None:
        self.run = run
        self.started = time.monotonic()
        self.cpu_started = cpu_seconds()
        self.last = (self.started, tree_cpu_seconds())
        """(time, CPU seconds of the process tree) at the previous row."""

    def row(
        self,
        step: int,
        stats: StepStats,
        eval_row: dict[str, float],
        trainer: dict[str, Any],
        *,
        sampler_restarts: int,
        probe_gap: float | None,
        stage: Stage,
        weights: dict[str, float],
        correctness: str | None,
    ) -> dict[str, Any]:
        elapsed = time.monotonic() - stats.started
        scored = [r for r in stats.records if r.error is None]
        row: dict[str, Any] = {"step": step, "time": round(time.time(), 3)}
        row["stage"] = stage.index
        row["stage/name"] = stage.name
        row["reward/mean"] = mean(r.reward for r in scored if r.reward is not None)
        row["reward/train_mean"] = mean(stats.train_rewards)
        names = sorted({k for r in scored for k in (*r.rewards, *r.metrics)})
        for name in names:
            row[f"reward/{name}"] = mean(
                {**r.metrics, **r.rewards}[name]
                for r in scored
                if name in r.rewards or name in r.metrics
            )
        row["batch/samples"] = stats.samples
        row["batch/rollouts"] = len(stats.versions)
        row["batch/loss_tokens"] = stats.loss_tokens
        row["batch/skipped"] = int(stats.samples == 0)
        zero = stats.drops.get("zero_variance", 0)
        row["batch/zero_advantage_share"] = (
            round(zero / stats.groups_seen, 4) if stats.groups_seen else None
        )
        row["batch/groups_seen"] = stats.groups_seen
        row["rollouts/total"] = len(stats.records)
        row["rollouts/reused"] = stats.reused
        row.update(hacking_metrics(stats.records, weights, correctness))
        row["off_policy/mean"] = mean(float(step - v) for v in stats.versions)
        row["off_policy/max"] = max((step - v for v in stats.versions), default=None)
        for kind, count in stats.drops.items():
            row[f"drops/{kind}"] = count
        row["drops/total"] = sum(stats.drops.values())
        for kind, count in stats.errors.items():
            row[f"errors/{kind}"] = count
        row["errors/total"] = sum(stats.errors.values())
        completion = sum(r.usage.completion_tokens for r in stats.records)
        row["perf/tokens_sampled"] = completion
        row["perf/tokens_per_s"] = round(completion / max(elapsed, 1e-9), 2)
        row["time/step_s"] = round(elapsed, 3)
        row["time/wait_policy_s"] = round(stats.wait_policy_s, 3)
        row["time/elapsed_s"] = round(time.monotonic() - self.started, 3)
        row["perf/cpu_s_orchestrator"] = round(cpu_seconds() - self.cpu_started, 2)
        now, tree = time.monotonic(), tree_cpu_seconds()
        row["perf/cpu_s_total"] = round(tree, 2)
        row["perf/cores_busy"] = round((tree - self.last[1]) / max(now - self.last[0], 1e-9), 3)
        self.last = (now, tree)
        row["mem/orchestrator_peak_rss_mb"] = peak_rss_mb()
        row["sampler/restarts"] = sampler_restarts
        if probe_gap is not None:
            row["probe/max_abs_diff"] = probe_gap
        for key, value in trainer.items():
            if key != "step":
                row[f"trainer/{key}"] = value
        row.update(eval_row)
        return row

    async def trainer_half(self, step: int, check: Callable[[], None]) -> dict[str, Any]:
        """The trainer's line for `step`, or {} if it does not come in time; `check` (the
        run's ChildProcesses.check) stops the wait when the trainer died after the broadcast."""
        path = self.run.trainer_metrics
        deadline = time.monotonic() + TRAINER_LINE_WAIT_S
        while True:
            if path.is_file():
                for line in reversed(path.read_text().splitlines()):
                    try:
                        data = json.loads(line)
                    except ValueError:
                        continue
                    if data.get("step") == step:
                        return dict(data)
            if time.monotonic() > deadline:
                return {}
            check()
            await asyncio.sleep(0.05)
