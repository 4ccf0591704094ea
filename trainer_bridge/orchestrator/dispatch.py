"""What to sample next: the task order and the async bound.

The bound, in batches: enough work in flight for the batches up to `version +
max_async_level`, so with A=0 the orchestrator samples exactly one batch and then waits for
the policy trained on it (synchronous, same code), and with A=1 it samples batch n+1 while
the trainer trains on batch n. Each group is sampled for the first of those batches that its
stage's rollouts (ready or in flight) do not fill yet, so a group is always sampled with the
environment, sampling and algorithm of the stage that will train on it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence

from prime_env.tasks import Task


class TaskOrder:
    """The train split, shuffled anew each epoch from the run's seed; `cursor` counts the
    tasks handed out so far (checkpointed, so a resumed run continues the same order). The
    tasks are passed per call: a stage may train on other data (another env args' split)."""

    def __init__(self, seed: int, cursor: int = 0) -> None:
        self.seed = seed
        self.cursor = cursor

    def next(self, tasks: Sequence[Task]) -> tuple[int, Task]:
        """The next task and its index in the whole order (the deterministic seed's input)."""
        epoch, index = divmod(self.cursor, len(tasks))
        order = list(range(len(tasks)))
        random.Random(f"{self.seed}-{epoch}").shuffle(order)
        self.cursor += 1
        return self.cursor - 1, tasks[order[index]]


def target_step(
    step: int,
    version: int,
    *,
    max_async_level: int,
    max_steps: int,
    batch_size: Callable[[int], int],
    stage_of: Callable[[int], int],
    have: Mapping[int, int],
) -> int | None:
    """The step the next group should be sampled for, or None when the bound is reached.

    `have` holds, by stage, the rollouts ready or in flight; steps from `step` to the bound
    use them up in order, each taking its stage's batch size."""
    horizon = min(version + max_async_level, max_steps - 1)
    remaining = dict(have)
    for t in range(step, horizon + 1):
        stage, need = stage_of(t), batch_size(t)
        if remaining.get(stage, 0) >= need:
            remaining[stage] -= need
            continue
        return t
    return None
