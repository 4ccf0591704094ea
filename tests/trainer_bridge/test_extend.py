"""Adding steps to a run (`prime train resume --max-steps N`): a decaying schedule needs a
choice, `restart`/`constant` add a stage over the new steps after the stages that ran, and a
constant schedule just continues."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainer_bridge.config import ConfigError, TrainConfig
from trainer_bridge.extend import AlreadyFinished, check_steps_left, extended

RUN = Path("outputs/train/run")


def config(max_steps: int, scheduler: str = "cosine", **more: object) -> TrainConfig:
    data = {"max_steps": max_steps, "trainer": {"scheduler": {"type": scheduler}}, **more}
    return TrainConfig.model_validate(data)


def test_a_decaying_schedule_is_not_extended_without_a_choice() -> None:
    with pytest.raises(ConfigError, match="linear learning-rate schedule ends at lr 0 at step 4"):
        extended(config(4, "linear"), config(6, "linear"), RUN, None)
    assert extended(config(4, "constant"), config(6, "constant"), RUN, None).max_steps == 6
    assert extended(config(4), config(6), RUN, "extend") == config(6)
    with pytest.raises(ConfigError, match="adds none"):
        extended(config(4), config(4), RUN, "restart")


def test_restart_and_constant_add_a_stage_after_the_stages_that_ran() -> None:
    stages = [
        {"name": "warm", "max_steps": 2, "orchestrator": {"batch_size": 16}},
        {"name": "rl", "max_steps": 50},
    ]
    stored = config(5, stages=stages)
    grown = config(8, stages=stages)
    restarted = extended(stored, grown, RUN, "restart")
    plan = [(s.name, s.start, s.end) for s in restarted.stage_plan()]
    assert plan == [("warm", 0, 2), ("rl", 2, 5), ("restart_5", 5, 8)]
    assert restarted.stage_plan()[0].config.orchestrator.batch_size == 16
    assert restarted.stage_plan()[2].config.trainer.scheduler.type == "cosine"
    held = extended(config(3), config(5), RUN, "constant")
    assert [(s.name, s.start, s.end) for s in held.stage_plan()] == [
        ("main", 0, 3),
        ("constant_3", 3, 5),
    ]
    assert held.stage_plan()[1].config.trainer.scheduler.type == "constant"
    assert held.stage_plan()[0].config.trainer.scheduler.type == "cosine"


def test_a_run_with_no_steps_left_says_how_to_train_further() -> None:
    check_steps_left(RUN, 3, 4, None)
    with pytest.raises(AlreadyFinished, match="trained all 4 of its steps.*--max-steps 8"):
        check_steps_left(RUN, 4, 4, None)
    with pytest.raises(AlreadyFinished, match=r"already trained 4 steps \(--max-steps 2\)"):
        check_steps_left(RUN, 4, 2, 2)
