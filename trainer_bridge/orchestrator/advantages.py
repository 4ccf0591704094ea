"""Group-relative advantages: reward − group mean (Dr. GRPO), optionally ÷ group std (GRPO).

A group is every scored rollout of one task from one dispatch, keyed by (dispatch, task):
keying by prompt text would merge two dispatches of the same task, or two tasks with equal
prompts, into one baseline (Search-R1#88). A group whose rewards are all equal carries no
learning signal (every advantage is 0): it is dropped and counted, not trained on.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

Item = TypeVar("Item")

STD_EPS = 1e-6
ZERO_VARIANCE_TOL = 1e-9


def group_advantages(rewards: Sequence[float], *, std_norm: bool = False) -> list[float] | None:
    """Advantages of one group's rewards, or None when the group has zero variance."""
    if len(rewards) < 2:
        raise ValueError(f"a group needs at least 2 scored rollouts, got {len(rewards)}")
    mean = math.fsum(rewards) / len(rewards)
    centred = [r - mean for r in rewards]
    if max(abs(c) for c in centred) <= ZERO_VARIANCE_TOL:
        return None
    if not std_norm:
        return centred
    std = math.sqrt(math.fsum(c * c for c in centred) / (len(rewards) - 1))
    return [c / (std + STD_EPS) for c in centred]


@dataclass
class Advantaged(Generic[Item]):
    """Items paired with their advantages, and what was left out and why."""

    items: list[tuple[Item, float]] = field(default_factory=list)
    zero_variance_groups: int = 0
    small_groups: int = 0
    """Groups with fewer than 2 scored members (the rest errored): no baseline to compare to."""


def assign_advantages(
    groups: Mapping[Hashable, Sequence[tuple[Item, float]]],
    *,
    std_norm: bool = False,
    drop_zero_variance: bool = True,
) -> Advantaged[Item]:
    """Pair each (item, reward) of each group with its advantage.

    `groups` maps a (dispatch, task) key to that group's scored members; errored rollouts must
    already be left out (they are never scored as 0)."""
    result: Advantaged[Item] = Advantaged()
    for members in groups.values():
        if len(members) < 2:
            result.small_groups += 1
            continue
        advantages = group_advantages([reward for _, reward in members], std_norm=std_norm)
        if advantages is None:
            result.zero_variance_groups += 1
            if drop_zero_variance:
                continue
            advantages = [0.0] * len(members)
        result.items.extend((item, adv) for (item, _), adv in zip(members, advantages))
    return result
