"""Checking a reference policy: does it score what its environment declares?

`prime eval validate ENV` runs this with no model: the environment's reference through its own
harness and rubric once per eval task, then each reward against `min_reward` and the mean
against `mean_reward`. A broken solver, a task that became unsolvable, a reward function that
drifted: each shows up as a shortfall naming the task.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .environment import Environment
from .record import RolloutRecord
from .reference import ReferenceClient
from .runner import run_rollouts

TOLERANCE = 1e-9
"""Rewards are weighted float sums (1.0 + 0.2 × 1.0 is not exactly 1.2 everywhere): a declared
score counts as reached within this much."""


@dataclass
class Shortfall:
    """One task the reference did not solve as declared: its reward (None: an error) and why."""

    task_id: str
    example_index: int
    reward: float | None
    why: str


@dataclass
class ReferenceReport:
    """What `validate_reference` found: passed when nothing fell short."""

    env: str
    records: list[RolloutRecord]
    min_reward: float | None
    mean_reward: float | None
    shortfalls: list[Shortfall] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.shortfalls and bool(self.records)

    @property
    def mean(self) -> float | None:
        rewards = [r.reward for r in self.records if r.reward is not None]
        return sum(rewards) / len(rewards) if rewards else None

    @property
    def lowest(self) -> float | None:
        rewards = [r.reward for r in self.records if r.reward is not None]
        return min(rewards) if rewards else None

    @property
    def errors(self) -> int:
        return sum(r.error is not None for r in self.records)


async def validate_reference(
    env: Environment, *, n: int | None = None, concurrency: int = 8
) -> ReferenceReport:
    """Run the reference once on each of the first `n` eval tasks (all when None) and compare
    its rewards with what it declares. An error record is a shortfall, never a pass: a
    reference that cannot finish a task does not show the environment is solvable."""
    client = ReferenceClient(env)
    reference = client.reference
    records = await run_rollouts(env, client, n=n, r=1, concurrency=concurrency)
    report = ReferenceReport(env.id, records, reference.min_reward, reference.mean_reward)
    for record in records:
        if record.error is not None:
            why = f"{record.error.type}: {record.error.message}"
        elif (
            reference.min_reward is not None
            and (record.reward or 0.0) < reference.min_reward - TOLERANCE
        ):
            why = f"reward {record.reward:.4g} < min_reward {reference.min_reward:g}"
        else:
            continue
        report.shortfalls.append(
            Shortfall(record.task_id, record.example_index, record.reward, why)
        )
    mean = report.mean
    if reference.mean_reward is not None and (
        mean is None or mean < reference.mean_reward - TOLERANCE
    ):
        shown = "no scored rollout" if mean is None else f"mean reward {mean:.4g}"
        report.shortfalls.append(
            Shortfall("(all)", -1, mean, f"{shown} < mean_reward {reference.mean_reward:g}")
        )
    return report
