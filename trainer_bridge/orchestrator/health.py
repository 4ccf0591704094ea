"""Signs in finished groups that a run cannot learn: a service the env needs is unavailable, or
group after group carries no signal."""

from __future__ import annotations

from prime_env.record import RolloutRecord
from trainer_bridge.orchestrator.errors import TrainingStopped
from trainer_bridge.orchestrator.groups import Group

UNAVAILABLE_SUFFIX = "_unavailable"
"""Error types that say a service the env needs cannot run here at all (`sandbox_unavailable`:
no Docker daemon or image; an env's own `InfraError("…_unavailable", …)`), as opposed to one
failure of it. The sampler's failures are `sampler_error` and have their own rebuild rule."""
DROUGHT_WARNING_GROUPS = 10
"""Batches' worth of consecutive zero-variance groups before the run says so."""


def unavailable_service(records: list[RolloutRecord]) -> TrainingStopped | None:
    """The stop for the first rollout whose error says a service the env needs cannot run here.
    Every later rollout that needs it would fail the same way, so the batches would hold only
    the rollouts that never reached it (python-code: the answers without code, all scored 0):
    training on zeros. The errors stay records, never scores."""
    failed = [
        r.error
        for r in records
        if r.error is not None and r.error.type.endswith(UNAVAILABLE_SUFFIX)
    ]
    if not failed:
        return None
    return TrainingStopped(
        f"{failed[0].type}: {failed[0].message}. Every rollout that needs it would "
        "fail the same way and the batches would hold only those that never "
        "reached it, so the run stops instead of training on them; fix it and "
        "resume"
    )


class Drought:
    """Counts groups in a row with equal rewards for every rollout: with every reward equal (a
    model that never solves the task) the run would otherwise sample silently forever."""

    def __init__(self, groups_per_batch: int) -> None:
        self.groups_per_batch = groups_per_batch
        self.count = 0

    def note(self, group: Group) -> str | None:
        """The warning to print, once, when the drought reaches its bound."""
        if group.dropped != "zero_variance":
            self.count = 0
            return None
        self.count += 1
        if self.count != DROUGHT_WARNING_GROUPS * self.groups_per_batch:
            return None
        return (
            f"{self.count} groups in a row had equal rewards for every rollout, so "
            "there is nothing to learn from yet; check the env's reward (or re-weight a "
            "metric with orchestrator.reward.weights), or set "
            "orchestrator.filter_zero_advantages = false"
        )
