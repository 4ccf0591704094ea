"""A task's rollouts as one group: screened, then turned into samples with group advantages.

Error records are never trained; a group needs ≥ 2 scored members for a baseline, and a group
whose training rewards are all equal carries no signal (dropped unless
`filter_zero_advantages = false`). This is where rollouts become training samples: GRPO's
`Screener`; another way of making them (a new algorithm) sits beside it and is named in
orchestrator/algorithms.py.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from prime_env.record import RolloutRecord
from trainer_bridge.config import OrchestratorConfig
from trainer_bridge.orchestrator.advantages import group_advantages
from trainer_bridge.orchestrator.rewards import training_reward
from trainer_bridge.orchestrator.samples import SampleError, samples_from_record
from trainer_bridge.protocol.batches import TrainSample


@dataclass
class Group:
    """One task's rollouts, screened: `samples` is empty when the group was dropped."""

    key: str
    dispatch_version: int
    records: list[RolloutRecord]
    order: int = 0
    """The task's place in the run's task order (the dispatch order): batches take groups in
    this order, never in completion order."""
    stage: int = 0
    """The stage it was sampled for: only that stage's batches take it."""
    reused: bool = False
    """Sampled by a run that stopped before training on it, kept for its resume."""
    train_rewards: list[float] = field(default_factory=list)
    """The training reward of each record without an error."""
    samples: list[TrainSample] = field(default_factory=list)
    rollouts: int = 0
    version: int = 0
    dropped: str | None = None
    sample_errors: Counter[str] = field(default_factory=Counter)
    """Scored records that could not become samples, by `SampleError.error_type`."""


class Screener:
    """Screens groups and gives their rollouts samples with group-relative advantages."""

    def __init__(self, weights: dict[str, float], config: OrchestratorConfig) -> None:
        self.weights = weights
        self.std_norm = config.advantage.std_norm
        self.filter_zero_advantages = config.filter_zero_advantages
        self.temperature = config.sampling.temperature

    def screen(self, key: str, version: int, records: list[RolloutRecord], order: int = 0) -> Group:
        """The group of `records`, dispatched on policy `version` (the records' own policy
        versions are filled in where the backend did not report one)."""
        for record in records:
            if record.policy_version is None:
                record.policy_version = version
        group = Group(key, version, records, order)
        group.train_rewards = [training_reward(r, self.weights) for r in records if r.error is None]
        scored = [r for r in records if r.error is None and r.reward is not None]
        group.version = min((r.policy_version or version for r in records), default=version)
        if len(scored) < 2:
            group.dropped = "group_too_small"
            return group
        rewards = [training_reward(r, self.weights) for r in scored]
        advantages = group_advantages(rewards, std_norm=self.std_norm)
        if advantages is None:
            if self.filter_zero_advantages:
                group.dropped = "zero_variance"
                return group
            advantages = [0.0] * len(scored)
        for record, advantage in zip(scored, advantages):
            try:
                group.samples += samples_from_record(
                    record, advantage=advantage, temperature=self.temperature, group=key
                )
                group.rollouts += 1
            except SampleError as exc:
                group.sample_errors[exc.error_type] += 1
        if group.sample_errors:
            group.dropped = None if group.rollouts >= 2 else next(iter(group.sample_errors))
            if group.rollouts < 2:
                group.samples = []
        return group
