"""Per step: the share of rollouts paid without being correct, and the most repeated texts."""

from __future__ import annotations

from prime_env.record import RolloutRecord
from trainer_bridge.orchestrator.hacking import hacking_metrics


def rollout(i: int, text: str, correct: float, fmt: float) -> RolloutRecord:
    return RolloutRecord(
        run_id="r", env="e", task_id="t", example_index=0, rollout_index=i, model="m",
        prompt=[], completion=[{"role": "assistant", "content": text}], reward=correct,
        rewards={"correct": correct}, metrics={"boxed": fmt},
    )  # fmt: skip


def test_a_farmed_bonus_shows_as_paid_but_wrong_and_one_repeated_text() -> None:
    records = [rollout(i, "\\boxed{42}", 0.0, 1.0) for i in range(5)]
    records += [rollout(5, "\\boxed{7}", 1.0, 1.0), rollout(6, "no box", 0.0, 0.0)]
    weights = {"correct": 1.0, "boxed": 0.2}
    out = hacking_metrics(records, weights, "correct")
    assert out["hacking/rewarded_incorrect"] == round(5 / 7, 4)
    assert out["hacking/top_completion_share"] == round(5 / 7, 4)
    assert out["hacking/top_completions"] == [{"text": "\\boxed{42}", "count": 5}]
    unpaid = hacking_metrics(records, {"correct": 1.0}, "correct")
    assert unpaid["hacking/rewarded_incorrect"] == 0.0  # the bonus is not paid: nothing farmed
    assert "hacking/rewarded_incorrect" not in hacking_metrics(records, weights, None)
    assert hacking_metrics([], weights, "correct") == {}
