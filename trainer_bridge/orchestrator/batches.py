"""Batch assembly: screened groups wait here until they make a step's batch.

A batch takes whole groups of its stage, oldest dispatch first (which groups finish first is
timing, and a batch must not depend on it: with --deterministic a resumed run repeats an
uninterrupted one bit for bit); a group sampled by a policy older than `step -
max_off_policy_steps` is dropped as stale, one sampled for an earlier stage as `stage_ended`.

A step always ends: once it has seen `max_groups_per_step` finished groups it takes the groups
with signal it has, even fewer than `batch_size` rollouts, or none (a step with no update,
when every group had zero advantage). Every record a step saw, dropped or errored, goes to
`rollouts/step_N.jsonl`.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from prime_env.record import RolloutRecord
from trainer_bridge.orchestrator.groups import Group
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
    groups_seen: int = 0
    """Finished groups accounted to this step: batched and dropped."""
    reused: int = 0
    """Rollouts in the batch that a stopped run had sampled (orchestrator/unbatched.py)."""
    samples: int = 0
    loss_tokens: int = 0
    wait_policy_s: float = 0.0


class Batches:
    """The groups waiting for a batch, the stats of the step being sampled, the stats of the
    steps written but not yet trained (`pending`) and the groups of the batches written since
    the newest checkpoint (`written`: a stopped run keeps them for its resume)."""

    def __init__(self, run: RunDir, max_off_policy_steps: int) -> None:
        self.run = run
        self.max_off_policy_steps = max_off_policy_steps
        self.ready: list[Group] = []
        self.stats = StepStats()
        self.pending: dict[int, StepStats] = {}
        self.written: dict[int, list[Group]] = {}

    def usable_rollouts(self, stage: int | None = None) -> int:
        return sum(
            g.rollouts
            for g in self.ready
            if g.dropped is None and (stage is None or g.stage == stage)
        )

    def take(self, step: int, stage: int, batch_size: int, max_groups: int) -> list[Group] | None:
        """Groups for batch `step` of `stage` (drops recorded) once they hold `batch_size`
        rollouts, or once the step has seen `max_groups` groups (then possibly none)."""
        floor = step - self.max_off_policy_steps
        kept: list[Group] = []
        for group in sorted(self.ready, key=lambda g: g.order):
            if group.dropped is None and group.stage < stage:
                group.dropped = "stage_ended"
            if group.dropped is None and group.version < floor:
                group.dropped = "stale"
            if group.dropped is not None:
                self.account(group)
            else:
                kept.append(group)
        self.ready = kept
        mine = [g for g in self.ready if g.stage == stage]
        usable = sum(g.rollouts for g in mine)
        if usable < batch_size and self.stats.groups_seen + len(mine) < max_groups:
            return None
        chosen: list[Group] = []
        total = 0
        for group in mine:
            if total >= batch_size:
                break
            chosen.append(group)
            total += group.rollouts
        self.ready = [g for g in self.ready if g not in chosen]
        return chosen

    def account(self, group: Group) -> None:
        self.stats.records += group.records
        self.stats.groups_seen += 1
        for record in group.records:
            if record.error is not None:
                self.stats.errors[record.error.type] += 1
        if group.dropped is not None:
            self.stats.drops[group.dropped] += 1

    def write(self, step: int, groups: list[Group], meta: dict[str, object]) -> None:
        """Write batch `step` (empty: a step with no update) and the step's rollouts; its
        stats wait in `pending`."""
        samples: list[TrainSample] = []
        for group in groups:
            self.account(group)
            samples += group.samples
            self.stats.versions += [group.version] * group.rollouts
            self.stats.train_rewards += group.train_rewards
            self.stats.reused += group.rollouts if group.reused else 0
        self.stats.samples = len(samples)
        self.stats.loss_tokens = sum(s.num_loss_tokens for s in samples)
        self._write_rollouts(step)
        write_batch(
            self.run.root,
            step,
            samples,
            {
                **meta,
                "groups": [g.key for g in groups],
                "policy_versions": sorted(set(self.stats.versions)),
            },
        )
        self.pending[step] = self.stats
        self.written[step] = groups
        self.stats = StepStats()

    def checkpointed(self, step: int) -> None:
        """Batches before `step` are in a checkpoint: their groups are no longer kept."""
        for old in [s for s in self.written if s < step]:
            del self.written[old]

    def unbatched(self) -> list[Group]:
        """The finished groups no checkpoint holds: those waiting, and those of the batches
        written since the newest checkpoint (dispatch order)."""
        groups = [g for step in sorted(self.written) for g in self.written[step]]
        return sorted([*groups, *self.ready], key=lambda g: g.order)

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
