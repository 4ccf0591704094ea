"""Training a run past its end (`prime train resume RUN --max-steps N`): how the added steps are
scheduled, and a finished run told apart from one with steps left.

A decaying schedule (linear, cosine) reaches lr 0 at the run's last step; continuing it as it
stands would train the added steps at (almost) 0, so the choice is the user's, asked for by
name: `extend` stretches the schedule over all N steps, `restart` and `constant` add a stage
over the new steps (a fresh schedule, or the configured lr held constant; a stage starts a fresh
AdamW, as every stage does). A constant schedule simply continues.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from trainer_bridge.config import ConfigError, StageConfig, TrainConfig

Schedule = Literal["extend", "restart", "constant"]
SCHEDULES: tuple[Schedule, ...] = ("extend", "restart", "constant")


class AlreadyFinished(ConfigError):
    """The run has trained every step asked for: nothing to resume (the message says how to
    train further)."""


def check_steps_left(run_root: Path, done: int, max_steps: int, asked: int | None) -> None:
    """Raise AlreadyFinished when a completed run's newest checkpoint is at or past
    `max_steps` (`asked`: the --max-steps given, None when it is the run's own)."""
    if done < max_steps:
        return
    if asked is not None:
        head = f"{run_root} has already trained {done} steps (--max-steps {asked})"
    else:
        head = f"{run_root} finished: it trained all {done} of its steps"
    raise AlreadyFinished(
        f"{head}; nothing to resume. To train further: prime train resume {run_root} "
        f"--max-steps {done + max(done, 1)} (more steps than {done})"
    )


def extended(
    stored: TrainConfig, config: TrainConfig, run_root: Path, schedule: Schedule | None
) -> TrainConfig:
    """`config` (a resume of `stored`) with its added steps scheduled as chosen: unchanged when
    it adds no steps or its schedule is constant and no choice was made; refused (ConfigError,
    listing the choices) when it adds steps to a decaying schedule without one."""
    old, new = stored.max_steps, config.max_steps
    if new <= old:
        if schedule is not None:
            raise ConfigError(
                f"--schedule {schedule} applies to added steps; {run_root} has {old} steps "
                f"and --max-steps {new} adds none"
            )
        return config
    last = stored.stage_plan()[-1]
    scheduler = last.config.trainer.scheduler
    if schedule is None and scheduler.type == "constant":
        return config
    if schedule is None:
        lr = last.config.trainer.optim.lr
        span = f"steps {old}-{new}"
        raise ConfigError(
            f"refusing to extend {run_root} from {old} to {new} steps without a choice: its "
            f"{scheduler.type} learning-rate schedule ends at lr 0 at step {old}, so the added "
            "steps would not train. Choose how they train:\n"
            f"  --schedule extend    stretch the {scheduler.type} schedule over all {new} steps "
            "(the lr goes back up to where the longer schedule is)\n"
            f"  --schedule restart   a new stage over {span}: a fresh {scheduler.type} "
            f"schedule from lr {lr:g} (warmup {scheduler.warmup_steps}) and a fresh AdamW\n"
            f"  --schedule constant  a new stage over {span} at the constant lr {lr:g} "
            "(trainer.optim.lr) and a fresh AdamW"
        )
    if schedule == "extend":
        return config
    trainer: dict[str, object] = {}
    if schedule == "constant":
        trainer = {"scheduler": {"type": "constant", "warmup_steps": 0}}
    plan = stored.stage_plan()
    kept = [
        StageConfig(
            name=stage.name,
            max_steps=stage.steps,
            orchestrator=listed.orchestrator,
            trainer=listed.trainer,
        )
        for stage, listed in zip(plan, stored.stages or [StageConfig(name="main", max_steps=old)])
    ]
    added = StageConfig(name=f"{schedule}_{old}", max_steps=new - old, trainer=trainer)
    data = config.model_dump(mode="json")
    data["stages"] = [stage.model_dump(mode="json") for stage in (*kept, added)]
    return TrainConfig.model_validate(data)
