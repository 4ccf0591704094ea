"""Group advantages: Dr. GRPO centring, optional std normalisation, zero-variance drops."""

from __future__ import annotations

import math

import pytest

from trainer_bridge.orchestrator.advantages import assign_advantages, group_advantages


def test_dr_grpo_is_reward_minus_group_mean() -> None:
    assert group_advantages([1.0, 0.0, 0.0, 1.0]) == [0.5, -0.5, -0.5, 0.5]
    assert group_advantages([0.2, 0.5, 0.8]) == pytest.approx([-0.3, 0.0, 0.3])


def test_std_norm_divides_by_sample_std() -> None:
    # mean 0.5, sample std sqrt((4 * 0.25) / 3)
    std = math.sqrt(1 / 3)
    got = group_advantages([1.0, 0.0, 0.0, 1.0], std_norm=True)
    assert got == pytest.approx([0.5 / std, -0.5 / std, -0.5 / std, 0.5 / std], rel=1e-5)


def test_zero_variance_group_is_none() -> None:
    assert group_advantages([0.7, 0.7, 0.7]) is None
    with pytest.raises(ValueError, match="at least 2"):
        group_advantages([1.0])


def test_assign_keys_groups_by_dispatch_and_task_and_counts_drops() -> None:
    groups = {
        (0, "t1"): [("a", 1.0), ("b", 0.0)],
        (1, "t1"): [("c", 1.0), ("d", 1.0)],  # same task, another dispatch: its own baseline
        (0, "t2"): [("e", 0.3)],  # the rest errored
    }
    result = assign_advantages(groups)
    assert result.items == [("a", 0.5), ("b", -0.5)]
    assert result.zero_variance_groups == 1 and result.small_groups == 1
    kept = assign_advantages(groups, drop_zero_variance=False)
    assert kept.items[2:] == [("c", 0.0), ("d", 0.0)] and kept.zero_variance_groups == 1
