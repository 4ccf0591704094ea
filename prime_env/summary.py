"""Summaries of rollout records: what the eval table, metadata.json and the hub show.

Error records are counted but excluded from every mean, so an outage never reads as a
model scoring 0.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
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


def summarize(records: Iterable[RolloutRecord], pass_threshold: float = 0.5) -> Summary:
    """Mean reward ± standard error over scored rollouts; pass@k for k = 1, 2, 4, … up to the
    rollouts per example (a rollout passes when reward >= pass_threshold)."""
    records = list(records)
    scored = [rec for rec in records if rec.error is None and rec.reward is not None]
    rewards = [rec.reward for rec in scored if rec.reward is not None]
    summary = Summary(
        rollouts=len(records),
        scored=len(scored),
        errors=len(records) - len(scored),
        error_types=dict(Counter(rec.error.type for rec in records if rec.error is not None)),
        stop_reasons=dict(Counter(rec.stop_reason or "unknown" for rec in records)),
        prompt_tokens=sum(rec.usage.prompt_tokens for rec in records),
        completion_tokens=sum(rec.usage.completion_tokens for rec in records),
    )
    if rewards:
        mean = sum(rewards) / len(rewards)
        summary.reward_mean = mean
        if len(rewards) > 1:
            variance = sum((x - mean) ** 2 for x in rewards) / (len(rewards) - 1)
            summary.reward_stderr = math.sqrt(variance / len(rewards))
        else:
            summary.reward_stderr = 0.0
    summary.rewards = _means(rec.rewards for rec in scored)
    summary.metrics = _means(rec.metrics for rec in scored)
    by_example: dict[int, list[bool]] = defaultdict(list)
    for rec in scored:
        by_example[rec.example_index].append((rec.reward or 0.0) >= pass_threshold)
    if by_example:
        max_k = min(len(v) for v in by_example.values())
        k = 1
        while k <= max_k:
            values = [pass_at_k(len(v), sum(v), k) for v in by_example.values()]
            summary.pass_at_k[str(k)] = sum(values) / len(values)
            k *= 2
    return summary


def _means(dicts: Iterable[dict[str, float]]) -> dict[str, float]:
    totals: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for d in dicts:
        for name, value in d.items():
            totals[name] += value
            counts[name] += 1
    return {name: totals[name] / counts[name] for name in totals}
