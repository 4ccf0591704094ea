"""The one summary of rollout records: clustered standard error, pass@k, errors never zeros, and
the SDK (`prime eval run`) and the hub (pushed batches merged at finalize) agreeing exactly."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hub_server.evals.samples import validate_batch
from hub_server.evals.stats import add_stored, batch_partial, merge_partial, summary_from_json
from prime_env.record import ErrorInfo, RolloutRecord, TokenUsage
from prime_env.summary import summarize as sdk_summarize
from registry_index.summary import SummaryBuilder, clustered_stderr, pass_at_k, summarize


def record(example: int, rollout: int, reward: float | None, **extra: Any) -> RolloutRecord:
    return RolloutRecord(
        run_id="run",
        env="alice/x@1.0",
        task_id=str(example),
        example_index=example,
        rollout_index=rollout,
        model="m",
        prompt=[{"role": "user", "content": "q"}],
        reward=reward,
        **extra,
    )


def failed(example: int, rollout: int) -> RolloutRecord:
    return record(example, rollout, None, error=ErrorInfo(type="rate_limit", message="429"))


def hub_summary(records: list[RolloutRecord], batch_size: int) -> Any:
    """What the hub computes: samples pushed as JSON in batches, a partial per batch, merged."""
    pushed = [json.loads(rec.to_json()) for rec in records]
    builder = SummaryBuilder()
    for start in range(0, len(pushed), batch_size):
        partial = batch_partial(validate_batch(pushed[start : start + batch_size]))
        assert merge_partial(builder, json.dumps(partial))
    return builder.summary()


def test_the_issue_example_clusters_by_example() -> None:
    """8 rollouts, 4 examples x 2: examples 0 and 1 always pass, 2 and 3 never. The rollouts of
    one example are not independent, so the error bar is the example means' (0.289), not the
    rollouts' (0.189)."""
    records = [record(i, j, 1.0 if i < 2 else 0.0) for i in range(4) for j in range(2)]
    summary = summarize(records)
    assert summary.reward_mean == 0.5
    assert summary.reward_stderr == pytest.approx(math.sqrt(1 / 3) / 2)  # 0.2887
    assert hub_summary(records, 3).reward_stderr == summary.reward_stderr


def test_clustered_stderr_is_the_plain_one_for_one_rollout_per_example() -> None:
    values = [0.1, 0.7, 0.4, 1.0]
    mean = sum(values) / 4
    plain = math.sqrt(sum((v - mean) ** 2 for v in values) / 3 / 4)
    assert clustered_stderr([(1, v) for v in values]) == pytest.approx(plain)
    assert clustered_stderr([(3, 2.0)]) is None  # one example says nothing about the spread


def test_errors_are_counted_never_zeros_and_pass_at_k() -> None:
    records = [
        record(0, 0, 1.0, metrics={"turns": 2}),
        record(0, 1, 0.0, metrics={"turns": 4}),
        record(1, 0, 0.0),
        record(1, 1, 0.0),
        failed(2, 0),
        failed(2, 1),
    ]
    summary = summarize(records)
    assert summary.reward_mean == 0.25 and summary.scored == 4 and summary.rollouts == 6
    assert summary.errors == 2 and summary.error_types == {"rate_limit": 2}
    assert summary.examples == 2
    assert summary.pass_at_k == {"1": 0.25, "2": 0.5}
    assert summary.reward_stderr == pytest.approx(0.5 / 2)  # example means 0.5 and 0: sd 0.5
    assert summary.metrics == {"turns": 3.0}
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5)


def test_summaries_stored_under_the_hubs_old_keys_still_read() -> None:
    old = {"mean_reward": 0.5, "stderr": 0.1, "n_examples": 2, "n_rollouts": 4, "n_errors": 1,
           "metrics": {"turns": 2.0}, "errors_by_type": {"x": 1}, "prompt_tokens": 3,
           "completion_tokens": 4}  # fmt: skip
    summary = summary_from_json(json.dumps(old))
    assert (summary.reward_mean, summary.reward_stderr, summary.rollouts) == (0.5, 0.1, 5)
    assert summary.error_types == {"x": 1} and summary.scored == 4


def test_old_batch_partials_fall_back_to_the_samples() -> None:
    builder = SummaryBuilder()
    assert not merge_partial(builder, json.dumps({"examples": [[0, 1.0, 1]], "metrics": {}}))
    assert not merge_partial(builder, None)
    add_stored(builder, validate_batch([json.loads(record(0, 0, 1.0).to_json())]))
    assert builder.summary().scored == 1


rewards = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@st.composite
def runs(draw: st.DrawFn) -> list[RolloutRecord]:
    n = draw(st.integers(1, 6))
    r = draw(st.integers(1, 4))
    records = []
    for i in range(n):
        for j in range(r):
            if draw(st.integers(0, 5)) == 0:
                records.append(failed(i, j))
                continue
            records.append(
                record(
                    i,
                    j,
                    draw(rewards),
                    rewards={"correct": draw(rewards)},
                    metrics={"turns": float(draw(st.integers(1, 5)))},
                    stop_reason=draw(st.sampled_from(["stop", "length", None])),
                    usage=TokenUsage(prompt_tokens=draw(st.integers(0, 99)), completion_tokens=3),
                )
            )
    return draw(st.permutations(records))


@settings(max_examples=150, deadline=None)
@given(records=runs(), batch_size=st.integers(1, 7))
def test_the_sdk_and_the_hub_summarise_the_same_records_equally(
    records: list[RolloutRecord], batch_size: int
) -> None:
    sdk = sdk_summarize(records)
    hub = hub_summary(records, batch_size)
    exact = {"reward_mean", "reward_stderr", "rewards", "metrics", "pass_at_k"}
    assert hub.model_dump(exclude=exact) == sdk.model_dump(exclude=exact)
    for field in exact:
        ours, theirs = getattr(hub, field), getattr(sdk, field)
        assert (ours is None) == (theirs is None)
        if ours is not None:
            assert ours == pytest.approx(theirs, rel=1e-12, abs=1e-12)
