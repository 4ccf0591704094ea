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
    """Accumulates rollout records, or the partials of earlier batches, into a summary.

    Everything it keeps is a sum or a count (per example, per metric, per error type), so the
    partial of one batch is computed once when the batch is pushed and finalize merges the
    partials instead of decompressing every sample again.
    """

    def __init__(self) -> None:
        self._examples: dict[int, list[float]] = defaultdict(lambda: [0.0, 0])  # sum, count
        self._metrics: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
        self._errors: dict[str, int] = defaultdict(int)
        self._tokens = [0, 0]

    def add(self, record: dict[str, Any]) -> None:
        usage = record.get("usage") or {}
        if isinstance(usage, dict):
            self._tokens[0] += int(_number(usage.get("prompt_tokens")) or 0)
            self._tokens[1] += int(_number(usage.get("completion_tokens")) or 0)
        error = record.get("error")
        if error:
            self._errors[str(error.get("type", "Error"))] += 1
            return
        example = self._examples[int(record["example_index"])]
        example[0] += float(record["reward"])
        example[1] += 1
        for group in ("rewards", "metrics"):
            for name, value in (record.get(group) or {}).items():
                number = _number(value)
                if number is not None:
                    metric = self._metrics[name]
                    metric[0] += number
                    metric[1] += 1

    def partial(self) -> dict[str, Any]:
        """The sums so far, as JSON-ready data for `merge`."""
        return {
            "examples": [[index, total, count] for index, (total, count) in self._examples.items()],
            "metrics": {name: list(pair) for name, pair in self._metrics.items()},
            "errors": dict(self._errors),
            "tokens": list(self._tokens),
        }

    def merge(self, partial: dict[str, Any]) -> None:
        for index, total, count in partial["examples"]:
            example = self._examples[int(index)]
            example[0] += total
            example[1] += count
        for name, (total, count) in partial["metrics"].items():
            metric = self._metrics[name]
            metric[0] += total
            metric[1] += count
        for kind, count in partial["errors"].items():
            self._errors[kind] += count
        self._tokens[0] += partial["tokens"][0]
        self._tokens[1] += partial["tokens"][1]

    def build(self) -> Summary:
        scored = [pair for pair in self._examples.values() if pair[1]]
        n_rollouts = int(sum(count for _total, count in scored))
        return Summary(
            mean_reward=math.fsum(t for t, _c in scored) / n_rollouts if n_rollouts else None,
            stderr=standard_error([total / count for total, count in scored]),
            n_examples=len(scored),
            n_rollouts=n_rollouts,
            n_errors=sum(self._errors.values()),
            metrics={name: t / c for name, (t, c) in sorted(self._metrics.items()) if c},
            errors_by_type=dict(sorted(self._errors.items())),
            prompt_tokens=self._tokens[0],
            completion_tokens=self._tokens[1],
        )


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
