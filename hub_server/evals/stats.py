"""The summary of an evaluation, recomputed by the hub from its samples.

Errored rollouts are infrastructure failures: they are counted, never averaged in as 0.
The standard error is taken over examples, not rollouts: the r rollouts of one example are
correlated, so treating them as independent would overstate the precision of the mean.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Summary:
    """What a leaderboard row and a run page show about one evaluation."""

    mean_reward: float | None = None
    stderr: float | None = None
    n_examples: int = 0
    n_rollouts: int = 0
    n_errors: int = 0
    metrics: dict[str, float] = field(default_factory=dict)
    errors_by_type: dict[str, int] = field(default_factory=dict)
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "mean_reward": self.mean_reward,
            "stderr": self.stderr,
            "n_examples": self.n_examples,
            "n_rollouts": self.n_rollouts,
            "n_errors": self.n_errors,
            "metrics": self.metrics,
            "errors_by_type": self.errors_by_type,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
        }


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return None


class SummaryBuilder:
    """Accumulates validated rollout records one at a time (samples are streamed from blobs)."""

    def __init__(self) -> None:
        self._per_example: dict[int, list[float]] = defaultdict(list)
        self._metric_sums: dict[str, float] = defaultdict(float)
        self._metric_counts: dict[str, int] = defaultdict(int)
        self._summary = Summary()

    def add(self, record: dict[str, Any]) -> None:
        usage = record.get("usage") or {}
        if isinstance(usage, dict):
            self._summary.prompt_tokens += int(_number(usage.get("prompt_tokens")) or 0)
            self._summary.completion_tokens += int(_number(usage.get("completion_tokens")) or 0)
        error = record.get("error")
        if error:
            self._summary.n_errors += 1
            kind = str(error.get("type", "Error"))
            self._summary.errors_by_type[kind] = self._summary.errors_by_type.get(kind, 0) + 1
            return
        self._per_example[int(record["example_index"])].append(float(record["reward"]))
        for group in ("rewards", "metrics"):
            values = record.get(group) or {}
            for name, value in values.items():
                number = _number(value)
                if number is not None:
                    self._metric_sums[name] += number
                    self._metric_counts[name] += 1

    def build(self) -> Summary:
        summary = self._summary
        rewards = [reward for rollouts in self._per_example.values() for reward in rollouts]
        summary.n_rollouts = len(rewards)
        summary.n_examples = len(self._per_example)
        if rewards:
            summary.mean_reward = math.fsum(rewards) / len(rewards)
        summary.stderr = standard_error([math.fsum(r) / len(r) for r in self._per_example.values()])
        summary.metrics = {
            name: self._metric_sums[name] / self._metric_counts[name]
            for name in sorted(self._metric_sums)
        }
        return summary


def standard_error(values: list[float]) -> float | None:
    """Sample standard deviation / sqrt(n); undefined (None) for fewer than two values."""
    n = len(values)
    if n < 2:
        return None
    mean = math.fsum(values) / n
    variance = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    return math.sqrt(variance / n)


def summarise(records: Iterable[dict[str, Any]]) -> Summary:
    builder = SummaryBuilder()
    for record in records:
        builder.add(record)
    return builder.build()
