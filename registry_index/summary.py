"""The summary of a set of rollout records: the one definition `prime eval run`, metadata.json,
`prime eval list` and the hub's run pages and leaderboards all show.

- Errored rollouts are infrastructure failures: counted by type, never averaged in as 0.
- The mean reward is over scored rollouts; its standard error is clustered by example. The r
  rollouts of one example are correlated (same prompt), so treating them as independent would
  overstate the precision of the mean. With G examples, N scored rollouts, per-example reward
  sums S_i over n_i rollouts and mean m = sum(S_i) / N:

      SE^2 = G / (G - 1) * sum_i (S_i - n_i m)^2 / N^2

  the cluster-robust (CR1) variance of a mean. With the same r for every example it equals the
  plain standard error of the G example means, and with r = 1 the usual standard error.
- pass@k is the unbiased estimator of Chen et al. (2021), averaged over examples, for k = 1, 2,
  4, ... up to the fewest rollouts any example has (a rollout passes at reward >= threshold).

Everything the builder keeps is a sum or a count per example, metric or error type, so the hub
stores a `partial()` per pushed batch and merges them at finalize, and a streaming eval run keeps
memory bounded by the number of examples, not rollouts.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import BaseModel, Field

from registry_index.record import ScoredRollout

DEFAULT_PASS_THRESHOLD = 0.5


class Summary(BaseModel):
    """Counts, mean reward ± clustered standard error, per-reward and per-metric means, pass@k."""

    rollouts: int = 0
    """Every record, errored ones included."""
    scored: int = 0
    errors: int = 0
    examples: int = 0
    """Examples with at least one scored rollout (the clusters of the standard error)."""
    error_types: dict[str, int] = Field(default_factory=dict)
    reward_mean: float | None = None
    reward_stderr: float | None = None
    """None with fewer than two examples: one cluster says nothing about the spread."""
    rewards: dict[str, float] = Field(default_factory=dict)
    metrics: dict[str, float] = Field(default_factory=dict)
    pass_at_k: dict[str, float] = Field(default_factory=dict)
    stop_reasons: dict[str, int] = Field(default_factory=dict)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    user_prompt_tokens: int = 0
    user_completion_tokens: int = 0
    """A model-played simulated user's tokens (beside the policy's above)."""
    user_cost_usd: float | None = None
    """Their cost; None when no user model ran or one's price is unknown."""


def pass_at_k(samples: int, correct: int, k: int) -> float:
    """Unbiased pass@k (Chen et al. 2021): 1 - C(n-c, k) / C(n, k)."""
    if samples - correct < k:
        return 1.0
    return 1.0 - math.comb(samples - correct, k) / math.comb(samples, k)


def clustered_stderr(clusters: Sequence[tuple[int, float]]) -> float | None:
    """Standard error of the mean of all values, clustered: `clusters` holds (count, sum) per
    example. None for fewer than two clusters."""
    groups = [(n, total) for n, total in clusters if n]
    if len(groups) < 2:
        return None
    count = sum(n for n, _ in groups)
    mean = math.fsum(total for _, total in groups) / count
    residuals = math.fsum((total - n * mean) ** 2 for n, total in groups)
    g = len(groups)
    return math.sqrt(g / (g - 1) * residuals) / count


class SummaryBuilder:
    """Accumulates records (or the partials of earlier batches) into a `Summary`."""

    def __init__(self, pass_threshold: float = DEFAULT_PASS_THRESHOLD) -> None:
        self.pass_threshold = pass_threshold
        self.rollouts = 0
        self.error_types: Counter[str] = Counter()
        self.stop_reasons: Counter[str] = Counter()
        self.tokens = [0, 0]
        self.user_tokens = [0, 0]
        self.user_cost: float | None = 0.0  # None once a user model's price is unknown
        # example index -> [scored rollouts, reward sum, passed]
        self.examples: dict[int, list[float]] = {}
        # "rewards"/"metrics" -> name -> [sum, count]
        self.values: dict[str, dict[str, list[float]]] = {"rewards": {}, "metrics": {}}

    def add(self, record: ScoredRollout) -> None:
        """Count one record (a `RolloutRecord`, or a pushed sample validated as `ScoredRollout`)."""
        self.rollouts += 1
        self.stop_reasons[record.stop_reason or "unknown"] += 1
        self.tokens[0] += record.usage.prompt_tokens
        self.tokens[1] += record.usage.completion_tokens
        if record.user_usage is not None:
            self._add_user(
                record.user_usage.prompt_tokens,
                record.user_usage.completion_tokens,
                record.user_usage.cost_usd,
            )
        if record.error is not None or record.reward is None:
            self.error_types[record.error.type if record.error else "Error"] += 1
            return
        example = self.examples.setdefault(record.example_index, [0, 0.0, 0])
        example[0] += 1
        example[1] += record.reward
        example[2] += record.reward >= self.pass_threshold
        for kind, values in (("rewards", record.rewards), ("metrics", record.metrics)):
            sums = self.values[kind]
            for name, value in values.items():
                pair = sums.setdefault(name, [0.0, 0])
                pair[0] += value
                pair[1] += 1

    def _add_user(self, prompt: int, completion: int, cost: float | None) -> None:
        self.user_tokens[0] += prompt
        self.user_tokens[1] += completion
        if (prompt or completion) and (cost is None or self.user_cost is None):
            self.user_cost = None
        elif self.user_cost is not None and cost is not None:
            self.user_cost += cost

    def partial(self) -> dict[str, Any]:
        """Everything counted so far as JSON-ready data, for `merge`."""
        return {
            "rollouts": self.rollouts,
            "error_types": dict(self.error_types),
            "stop_reasons": dict(self.stop_reasons),
            "tokens": list(self.tokens),
            "user_tokens": list(self.user_tokens),
            "user_cost": self.user_cost,
            "examples": [[index, *tally] for index, tally in self.examples.items()],
            "values": {kind: {k: list(v) for k, v in d.items()} for kind, d in self.values.items()},
        }

    def merge(self, partial: dict[str, Any]) -> None:
        """Add the counts of another builder's `partial()`."""
        self.rollouts += int(partial["rollouts"])
        self.error_types.update(partial["error_types"])
        self.stop_reasons.update(partial["stop_reasons"])
        self.tokens[0] += int(partial["tokens"][0])
        self.tokens[1] += int(partial["tokens"][1])
        user = partial.get("user_tokens") or [0, 0]  # partials stored before users counted
        self._add_user(int(user[0]), int(user[1]), partial.get("user_cost"))
        for index, n, total, passed in partial["examples"]:
            example = self.examples.setdefault(int(index), [0, 0.0, 0])
            example[0] += n
            example[1] += total
            example[2] += passed
        for kind, sums in partial["values"].items():
            for name, (total, count) in sums.items():
                pair = self.values[kind].setdefault(name, [0.0, 0])
                pair[0] += total
                pair[1] += count

    def summary(self) -> Summary:
        scored = int(sum(n for n, _total, _passed in self.examples.values()))
        summary = Summary(
            rollouts=self.rollouts,
            scored=scored,
            errors=self.rollouts - scored,
            examples=len(self.examples),
            error_types=dict(sorted(self.error_types.items())),
            stop_reasons=dict(sorted(self.stop_reasons.items())),
            prompt_tokens=self.tokens[0],
            completion_tokens=self.tokens[1],
            user_prompt_tokens=self.user_tokens[0],
            user_completion_tokens=self.user_tokens[1],
            user_cost_usd=self.user_cost if any(self.user_tokens) else None,
            rewards=_means(self.values["rewards"]),
            metrics=_means(self.values["metrics"]),
        )
        if scored:
            summary.reward_mean = math.fsum(t for _n, t, _p in self.examples.values()) / scored
            summary.reward_stderr = clustered_stderr(
                [(int(n), total) for n, total, _p in self.examples.values()]
            )
            fewest = int(min(n for n, _t, _p in self.examples.values()))
            k = 1
            while k <= fewest:
                values = [pass_at_k(int(n), int(c), k) for n, _t, c in self.examples.values()]
                summary.pass_at_k[str(k)] = math.fsum(values) / len(values)
                k *= 2
        return summary


def summarize(
    records: Iterable[ScoredRollout], pass_threshold: float = DEFAULT_PASS_THRESHOLD
) -> Summary:
    """The summary of `records` (see the module docstring for the statistics)."""
    builder = SummaryBuilder(pass_threshold)
    for record in records:
        builder.add(record)
    return builder.summary()


def _means(sums: dict[str, list[float]]) -> dict[str, float]:
    return {name: total / count for name, (total, count) in sorted(sums.items()) if count}
