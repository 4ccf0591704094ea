"""A stopped run's finished groups, kept for its resume: `rollouts/unbatched.jsonl`.

When a run stops (Ctrl-C, SIGTERM, a failure), the groups it finished that no trained batch
holds yet (those waiting for a batch, and those of batches written since the newest
checkpoint) are written here, one line per group. The resume continues from a checkpoint at
step S, where policies 0..S are the ones the stopped run had, so a group whose every token
was sampled by a policy <= S is as valid as one sampled again: it is screened anew and batched,
and its task is not dispatched again. Groups sampled by a policy > S are dropped (that
policy is trained again, differently). A SIGKILLed run writes nothing.

Each line also holds the group's samples as made: an algorithm that makes its groups itself
(a teacher's traces, a teacher's scores of the policy's tokens) cannot screen records again
without its teacher, so its resume takes those samples back as they were.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from prime_env.record import RolloutRecord
from registry_index.files import write_lines_atomic
from trainer_bridge.orchestrator.groups import Group
from trainer_bridge.protocol.batches import TrainSample
from trainer_bridge.protocol.run_dir import RunDir


@dataclass
class SavedGroup:
    key: str
    order: int
    stage: int
    dispatch_version: int
    records: list[RolloutRecord]
    samples: list[TrainSample]
    version: int
    rollouts: int
    train_rewards: list[float]

    def group(self) -> Group:
        """The group as the stopped run had made it (samples and all), marked reused."""
        return Group(
            self.key, self.dispatch_version, self.records, self.order, self.stage, True,
            self.train_rewards, self.samples, self.rollouts, self.version,
        )  # fmt: skip


def newest_policy(records: Iterable[RolloutRecord], dispatched: int) -> int:
    """The newest policy that sampled any token of these records."""
    versions = [dispatched]
    for record in records:
        if record.policy_version is not None:
            versions.append(record.policy_version)
        versions += [t.policy_version for t in record.turns or [] if t.policy_version is not None]
    return max(versions)


def save(run: RunDir, groups: Iterable[Group]) -> int:
    """Write the usable groups (replacing the file); return how many were kept."""
    lines = []
    for group in groups:
        if group.dropped is not None or not group.samples:
            continue
        body = {
            "key": group.key,
            "order": group.order,
            "stage": group.stage,
            "dispatch_version": group.dispatch_version,
            "records": [json.loads(r.to_json()) for r in group.records],
            "samples": [s.model_dump(mode="json") for s in group.samples],
            "version": group.version,
            "rollouts": group.rollouts,
            "train_rewards": group.train_rewards,
        }
        lines.append(json.dumps(body))
    if lines:
        write_lines_atomic(run.unbatched, lines)
    elif run.unbatched.exists():
        run.unbatched.unlink()
    return len(lines)


def take(run: RunDir, step: int) -> list[SavedGroup]:
    """The saved groups a resume at `step` may use (every token from a policy <= step); the
    file is consumed (a later stop writes what is still unbatched then)."""
    path = run.unbatched
    if not path.is_file():
        return []
    kept = []
    for line in path.read_text().splitlines():
        try:
            data = json.loads(line)
            records = [RolloutRecord.model_validate(r) for r in data["records"]]
            group = SavedGroup(
                str(data["key"]),
                int(data["order"]),
                int(data["stage"]),
                int(data["dispatch_version"]),
                records,
                [TrainSample.model_validate(s) for s in data["samples"]],
                int(data["version"]),
                int(data["rollouts"]),
                [float(r) for r in data["train_rewards"]],
            )
        except (ValueError, KeyError, TypeError):
            continue  # a torn line: those rollouts are sampled again
        if newest_policy(group.records, group.dispatch_version) <= step:
            kept.append(group)
    path.unlink()
    return kept
