"""The hub's summary of an evaluation, recomputed from its samples (a client's is not trusted).

The statistics are `registry_index.summary`'s, the ones `prime eval run` prints, so a run and its
leaderboard row show the same mean and error bar. Each pushed batch's `partial()` is stored with
it; finalize merges them instead of decompressing every sample again.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError

from hub_server.evals.integrity import finite_score, stored_json
from registry_index.record import ScoredRollout
from registry_index.summary import Summary, SummaryBuilder

# What the hub stored before the summary was shared with the SDK, and what each key is now.
_LEGACY_KEYS = {
    "mean_reward": "reward_mean",
    "stderr": "reward_stderr",
    "n_examples": "examples",
    "n_rollouts": "scored",
    "n_errors": "errors",
    "errors_by_type": "error_types",
}


def add_stored(builder: SummaryBuilder, records: Iterable[dict[str, Any]]) -> None:
    """Count stored samples (already checked by `samples.validate_batch`)."""
    for record in records:
        builder.add(ScoredRollout.model_validate(record))


def batch_partial(records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The sums of one pushed batch, stored beside it for finalize."""
    builder = SummaryBuilder()
    add_stored(builder, records)
    return builder.partial()


def merge_partial(builder: SummaryBuilder, partial_json: str | None) -> bool:
    """Merge a stored partial; False when there is none in the current form (read the samples)."""
    partial = stored_json(partial_json, {})
    if "values" not in partial:
        return False  # none, or stored before the shared summary (no pass@k, stop reasons)
    checked = SummaryBuilder(builder.pass_threshold)
    try:  # into a fresh builder first: a partial that breaks halfway adds nothing
        checked.merge(partial)
    except (KeyError, TypeError, ValueError):
        return False
    builder.merge(checked.partial())
    return True


def summary_from_json(text: str | None) -> Summary | None:
    """A stored summary, including ones written under the hub's earlier key names; None for
    one that does not parse. A number that is not a score the hub accepts (a run finalized
    before the rules of `integrity`) is dropped, so a page or an answer never carries it."""
    data = stored_json(text, {})
    if "values" not in data and "mean_reward" in data:
        data = {_LEGACY_KEYS.get(key, key): value for key, value in data.items()}
        data["rollouts"] = data.get("scored", 0) + data.get("errors", 0)
    if not data:
        return None
    try:
        summary = Summary.model_validate(data)
    except ValidationError:
        return None
    return finite_summary(summary)


def finite_summary(summary: Summary) -> Summary:
    """`summary` with every float that is not a finite, bounded score set to None (a mean, its
    standard error) or left out (a named reward, a metric, a pass@k)."""
    mean = finite_score(summary.reward_mean)
    return summary.model_copy(
        update={
            "reward_mean": mean,
            "reward_stderr": finite_score(summary.reward_stderr) if mean is not None else None,
            "rewards": _finite_values(summary.rewards),
            "metrics": _finite_values(summary.metrics),
            "pass_at_k": _finite_values(summary.pass_at_k),
        }
    )


def is_finite(summary: Summary) -> bool:
    """Whether every number of `summary` is a score the hub accepts (finalize checks)."""
    return finite_summary(summary) == summary


def _finite_values(values: dict[str, float]) -> dict[str, float]:
    return {name: value for name, value in values.items() if finite_score(value) is not None}
