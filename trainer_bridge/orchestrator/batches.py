"""Batch assembly: screened groups wait here until they make `batch_size` rollouts.

A batch takes whole groups, oldest dispatch first (which groups finish first is timing, and a
batch must not depend on it: with --deterministic a resumed run repeats an uninterrupted one
bit for bit); a group sampled by a policy older than `step - max_off_policy_steps` is dropped
as stale. Every record a step saw, dropped or errored, goes to `rollouts/step_N.jsonl`.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from prime_env.record import RolloutRecord
from trainer_bridge.orchestrator.groups import Group
from trainer_bridge.orchestrator.rewards import training_reward
from trainer_bridge.protocol.batches import TrainSample, write_batch
from trainer_bridge.protocol.run_dir import RunDir


@dataclass
class StepStats:
    """What one step's metrics line says about sampling (the trainer adds its half)."""

    started: float = field(default_factory=time.monotonic)
    records: list[RolloutRecord] = field(default_factory=list)
    drops: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    train_rewards: list[float] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    samples: int = 0
    loss_tokens: int = 0
    wait_policy_s: float = 0.0


class Batches:
    """The groups waiting for a batch, the stats of the step being sampled, and those of the
    steps written but not yet trained (`pending`)."""

    def __init__(
        self, run: RunDir, batch_size: int, max_off_policy_steps: int, weights: dict[str, float]
    ) -> None:
        self.run = run
        self.batch_size = batch_size
        self.max_off_policy_steps = max_off_policy_steps
        self.weights = weights
        self.ready: list[Group] = []
        self.stats = StepStats()
        self.pending: dict[int, StepStats] = {}

    def usable_rollouts(self) -> int:
        return sum(g.rollouts for g in self.ready if g.dropped is None)

    def take(self, step: int) -> list[Group] | None:
        """Groups for batch `step` (drops recorded) once they hold batch_size rollouts."""
        floor = step - self.max_off_policy_steps
        kept: list[Group] = []
        for group in sorted(self.ready, key=lambda g: g.order):
            if group.dropped is None and group.version < floor:
                group.dropped = "stale"
            if group.dropped is not None:
                self.account(group)
            else:
                kept.append(group)
        self.ready = kept
        if self.usable_rollouts() < self.batch_size:
            return None
        chosen: list[Group] = []
        total = 0
        while total < self.batch_size:
            group = self.ready.pop(0)
            chosen.append(group)
            total += group.rollouts
        return chosen

    def account(self, group: Group) -> None:
        self.stats.records += group.records
        for record in group.records:
            if record.error is not None:
                self.stats.errors[record.error.type] += 1
        if group.dropped is not None:
            self.stats.drops[group.dropped] += 1

    def write(self, step: int, groups: list[Group]) -> None:
        """Write batch `step` and the step's rollouts; its stats wait in `pending`."""
        samples: list[TrainSample] = []
        for group in groups:
            self.account(group)
            samples += group.samples
            self.stats.versions += [group.version] * group.rollouts
            self.stats.train_rewards += [
                training_reward(r, self.weights) for r in group.records if r.error is None
            ]
        self.stats.samples = len(samples)
        self.stats.loss_tokens = sum(s.num_loss_tokens for s in samples)
        self._write_rollouts(step)
        write_batch(
            self.run.root,
            step,
            samples,
            {
                "groups": [g.key for g in groups],
                "policy_versions": sorted(set(self.stats.versions)),
            },
        )
        self.pending[step] = self.stats
        self.stats = StepStats()

    def unfinished(self, step: int) -> dict[int, StepStats]:
        """On a stop: every waiting group accounted to step `step` (its records, errors
        included, written to rollouts/step_N.jsonl), and the stats of every step not trained."""
        for group in self.ready:
            self.account(group)
        self.ready = []
        if self.stats.records:
            self._write_rollouts(step)
            self.pending[step] = self.stats
            self.stats = StepStats()
        return {s: self.pending.pop(s) for s in sorted(self.pending)}

    def _write_rollouts(self, step: int) -> None:
        with self.run.rollouts(step).open("w") as fh:
            for record in self.stats.records:
                fh.write(record.to_json() + "\n")
