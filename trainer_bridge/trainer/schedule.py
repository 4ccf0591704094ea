"""A stage's learning-rate schedule: transformers' `get_scheduler` over the stage's steps.

One rule for the local trainer (over its AdamW) and the Lab's (over a stand-in optimizer
whose lr it reads each step and sends with `optim_step`)."""

from __future__ import annotations

from typing import Any

from trainer_bridge.config import TrainerConfig


def lr_schedule(optimizer: Any, tc: TrainerConfig, steps: int) -> Any:
    """`tc.scheduler` over `steps` steps of `optimizer` (constant with warm-up when asked)."""
    from transformers import get_scheduler

    name: str = tc.scheduler.type
    if name == "constant" and tc.scheduler.warmup_steps:
        name = "constant_with_warmup"
    return get_scheduler(
        name, optimizer, num_warmup_steps=tc.scheduler.warmup_steps, num_training_steps=steps
    )
