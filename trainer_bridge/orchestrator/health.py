"""Signs that a run cannot learn: a service the env needs is unavailable, or step after step
carries no signal."""

from __future__ import annotations

from prime_env.record import RolloutRecord
from trainer_bridge.orchestrator.errors import TrainingStopped
from trainer_bridge.orchestrator.sampler import SAMPLER_ERROR

UNAVAILABLE_SUFFIX = "_unavailable"
"""Error types that say a service the env needs cannot run here at all (`sandbox_unavailable`:
no Docker daemon or image; an env's own `InfraError("…_unavailable", …)`), as opposed to one
failure of it. The sampler's failures are `sampler_error` and have their own rebuild rule."""


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


def only_errors(step: int, records: list[RolloutRecord]) -> TrainingStopped | None:
    """The stop for a step whose every rollout was an error record (an env that cannot run
    its episodes here: a verifiers harness that cannot start, a dead server). Its groups hold
    no rewards at all, so "equal rewards" would be the wrong advice; the errors stay records.
    The sampler's own failures have their rule (a rebuild), so a step of them goes on."""
    if not records or any(r.error is None or r.error.type == SAMPLER_ERROR for r in records):
        return None
    first = next(r.error for r in records if r.error is not None)
    return TrainingStopped(
        f"every rollout of step {step} ({len(records)}) was an error, the first "
        f"{first.type}: {first.message}. There is nothing to train on; fix it (prime eval run "
        "shows the same errors) and resume"
    )


def no_signal(steps: int, groups: int) -> TrainingStopped:
    """The stop after `steps` steps in a row whose `groups` groups all had equal rewards for
    every rollout: the policy never earns a reward that differs within a group, so the run
    would spend its budget without an update."""
    return TrainingStopped(
        f"{steps} steps in a row had no update: all {groups} groups they sampled had equal "
        "rewards for every rollout, so there is nothing to learn from yet; check the env's "
        "reward (or re-weight a metric with orchestrator.reward.weights), or set "
        "orchestrator.filter_zero_advantages = false"
    )
