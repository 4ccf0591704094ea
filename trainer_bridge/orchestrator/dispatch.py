"""What to sample next: the train split's task order and the async bound.

The bound, in rollouts: enough work in flight for the batches up to `version +
max_async_level`, so with A=0 the orchestrator samples exactly one batch and then waits for
the policy trained on it (synchronous, same code), and with A=1 it samples batch n+1 while the
trainer trains on batch n.
"""

from __future__ import annotations

import random

from prime_env.tasks import Task


class TaskOrder:
    """The train split, shuffled anew each epoch from the run's seed; `cursor` counts the
    tasks handed out so far (checkpointed, so a resumed run continues the same order)."""

    def __init__(self, tasks: list[Task], seed: int, cursor: int = 0) -> None:
        self.tasks = tasks
        self.seed = seed
        self.cursor = cursor

    def next(self) -> tuple[int, Task]:
        """The next task and its index in the whole order (the deterministic seed's input)."""
        epoch, index = divmod(self.cursor, len(self.tasks))
        order = list(range(len(self.tasks)))
        random.Random(f"{self.seed}-{epoch}").shuffle(order)
        self.cursor += 1
        return self.cursor - 1, self.tasks[order[index]]


def rollouts_wanted(
    step: int, version: int, *, max_async_level: int, max_steps: int, batch_size: int
) -> int:
    """Rollouts the batches from `step` up to the bound need (0 once the bound is reached)."""
    horizon = min(version + max_async_level, max_steps - 1)
    if horizon < step:
        return 0
    return (horizon - step + 1) * batch_size
