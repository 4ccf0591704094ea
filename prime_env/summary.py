"""Summaries of rollout records: what the eval table, metadata.json and the hub show.

Error records are counted but excluded from every mean, so an outage never reads as a
model scoring 0.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable

from pydantic import BaseModel, Field

from .record import RolloutRecord


class Summary(BaseModel):
    rollouts: int
    scored: int
    errors: int
    error_types: dict[str, int] = Field(default_factory=dict)
    reward_mean: float | None = None
    reward_stderr: float | None = None
    rewards: dict[str, float] = Field(default_factory=dict)
    metrics: dict[str, float] = Field(default_factory=dict)
    pass_at_k: dict[str, float] = Field(default_factory=dict)
    stop_reasons: dict[str, int] = Field(default_factory=dict)
    prompt_tokens: int = 0
    completion_tokens: int = 0


def pass_at_k(samples: int, correct: int, k: int) -> float:
    """Unbiased pass@k (Chen et al. 2021): 1 - C(n-c, k) / C(n, k)."""
    if samples - correct < k:
        return 1.0
    return 1.0 - math.comb(samples - correct, k) / math.comb(samples, k)


class SummaryBuilder:
    """The summary kept up to date one record at a time, in memory bounded by the number of
    examples (not rollouts): a run streams its records to disk and keeps only this."""

    def __init__(self, pass_threshold: float = 0.5) -> None:
        self.pass_threshold = pass_threshold
        self.rollouts = 0
        self.scored = 0
        self.error_types: Counter[str] = Counter()
        self.stop_reasons: Counter[str] = Counter()
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self._mean = 0.0  # Welford's running mean and sum of squared deviations
        self._m2 = 0.0
        self._sums: dict[str, dict[str, float]] = {"rewards": {}, "metrics": {}}
        self._counts: dict[str, dict[str, int]] = {"rewards": {}, "metrics": {}}
        self._passes: dict[int, list[int]] = {}  # example index -> [rollouts, passed]

    def add(self, rec: RolloutRecord) -> None:
        self.rollouts += 1
        self.stop_reasons[rec.stop_reason or "unknown"] += 1
        self.prompt_tokens += rec.usage.prompt_tokens
        self.completion_tokens += rec.usage.completion_tokens
        if rec.error is not None:
            self.error_types[rec.error.type] += 1
            return
        if rec.reward is None:
            return
        self.scored += 1
        delta = rec.reward - self._mean
        self._mean += delta / self.scored
        self._m2 += delta * (rec.reward - self._mean)
        for kind, values in (("rewards", rec.rewards), ("metrics", rec.metrics)):
            sums, counts = self._sums[kind], self._counts[kind]
            for name, value in values.items():
                sums[name] = sums.get(name, 0.0) + value
                counts[name] = counts.get(name, 0) + 1
        tally = self._passes.setdefault(rec.example_index, [0, 0])
        tally[0] += 1
        tally[1] += rec.reward >= self.pass_threshold

    def summary(self) -> Summary:
        summary = Summary(
            rollouts=self.rollouts,
            scored=self.scored,
            errors=self.rollouts - self.scored,
            error_types=dict(self.error_types),
            stop_reasons=dict(self.stop_reasons),
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
        )
        if self.scored:
            summary.reward_mean = self._mean
            variance = self._m2 / (self.scored - 1) if self.scored > 1 else 0.0
            summary.reward_stderr = math.sqrt(variance / self.scored)
        summary.rewards = _means(self._sums["rewards"], self._counts["rewards"])
        summary.metrics = _means(self._sums["metrics"], self._counts["metrics"])
        if self._passes:
            max_k = min(n for n, _ in self._passes.values())
            k = 1
            while k <= max_k:
                values = [pass_at_k(n, c, k) for n, c in self._passes.values()]
                summary.pass_at_k[str(k)] = sum(values) / len(values)
                k *= 2
        return summary


def summarize(records: Iterable[RolloutRecord], pass_threshold: float = 0.5) -> Summary:
    """Mean reward ± standard error over scored rollouts; pass@k for k = 1, 2, 4, … up to the
    rollouts per example (a rollout passes when reward >= pass_threshold)."""
    builder = SummaryBuilder(pass_threshold)
    for rec in records:
        builder.add(rec)
    return builder.summary()


def _means(sums: dict[str, float], counts: dict[str, int]) -> dict[str, float]:
    return {name: sums[name] / counts[name] for name in sums}
