"""The hub's summary of an evaluation, recomputed from its samples (a client's is not trusted).

The statistics are `registry_index.summary`'s, the ones `prime eval run` prints, so a run and its
leaderboard row show the same mean and error bar. Each pushed batch's `partial()` is stored with
it; finalize merges them instead of decompressing every sample again.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

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
    if partial_json is None:
        return False
    partial = json.loads(partial_json)
    if "values" not in partial:
        return False  # stored before the shared summary: it lacks pass@k and stop reasons
    builder.merge(partial)
    return True


def summary_from_json(text: str) -> Summary:
    """A stored summary, including ones written under the hub's earlier key names."""
    data = json.loads(text)
    if "values" not in data and "mean_reward" in data:
        data = {_LEGACY_KEYS.get(key, key): value for key, value in data.items()}
        data["rollouts"] = data.get("scored", 0) + data.get("errors", 0)
    return Summary.model_validate(data)
