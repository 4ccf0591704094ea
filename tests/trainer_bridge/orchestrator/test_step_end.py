"""A step always ends: after `max_groups_per_step` finished groups it trains on what has
signal, or records a step with no update; `max_empty_steps` of those in a row stop the run
with the advice. Stages: each group is sampled for, and batched in, its own stage."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.trainer_bridge.orchestrator.test_orchestration import env, orchestrator, record
from trainer_bridge.config_loader import build_config
from trainer_bridge.orchestrator.dispatch import target_step
from trainer_bridge.orchestrator.errors import TrainingStopped
from trainer_bridge.orchestrator.stages import run_at, stage_runs
from trainer_bridge.protocol.batches import read_batch


def flat(orch: Any, key: str, order: int) -> Any:
    return orch.stages[0].algorithm.screen(key, 0, [record(i, 1, 0) for i in range(4)], order)


def varied(orch: Any, key: str, order: int) -> Any:
    return orch.stages[0].algorithm.screen(key, 0, [record(i, i % 2, 0) for i in range(4)], order)


def test_a_step_of_only_zero_advantage_groups_ends_at_the_bound_without_an_update(
    tmp_path: Path,
) -> None:
    orch = orchestrator(tmp_path, ("orchestrator.max_groups_per_step", 3))
    orch.batches.ready = [flat(orch, "d0", 0), flat(orch, "d1", 1)]
    assert orch.batches.take(0, 0, 8, 3) is None  # 2 groups seen, the bound is 3
    orch.batches.ready.append(flat(orch, "d2", 2))
    groups = orch.batches.take(0, 0, 8, 3)
    assert groups == []  # the step ends, with nothing to train on
    orch._write_step(groups)
    assert orch.step == 1 and read_batch(orch.run.root, 0).samples == []
    stats = orch.batches.pending[0]
    assert stats.groups_seen == 3 and stats.drops["zero_variance"] == 3
    row = orch._metrics_row(0, stats, {}, {})
    assert row["batch/skipped"] == 1 and row["batch/zero_advantage_share"] == 1.0
    assert len(orch.run.rollouts(0).read_text().splitlines()) == 12  # every record it saw


def test_at_the_bound_a_step_trains_on_the_groups_with_signal_it_has(tmp_path: Path) -> None:
    orch = orchestrator(tmp_path)
    orch.batches.ready = [flat(orch, "d0", 0), varied(orch, "d1", 1), flat(orch, "d2", 2)]
    groups = orch.batches.take(0, 0, 8, 3)
    assert groups is not None and [g.key for g in groups] == ["d1"]  # 4 of 8 rollouts
    orch._write_step(groups)
    assert len(read_batch(orch.run.root, 0).samples) == 4


def test_empty_steps_in_a_row_stop_the_run_with_the_advice(tmp_path: Path) -> None:
    orch = orchestrator(tmp_path, ("orchestrator.max_empty_steps", 2))
    orch.batches.ready = [flat(orch, "d0", 0)]
    orch._write_step(orch.batches.take(0, 0, 8, 1) or [])
    assert orch.fatal is None and orch.step == 1
    orch.batches.ready = [flat(orch, "d1", 1)]
    orch._write_step(orch.batches.take(1, 0, 8, 1) or [])
    assert isinstance(orch.fatal, TrainingStopped)
    assert "2 steps in a row had no update" in str(orch.fatal)
    assert "orchestrator.reward.weights" in str(orch.fatal)
    orch._log_unfinished_steps(str(orch.fatal))
    rows = [json.loads(line) for line in orch.run.metrics.read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1] and all("stopped" in r for r in rows)
    # a step with signal in between resets the count
    again = orchestrator(tmp_path / "b", ("orchestrator.max_empty_steps", 2))
    for i, make in enumerate([flat, varied, flat]):
        again.batches.ready = [make(again, f"d{i}", i)]
        again._write_step(again.batches.take(i, 0, 4, 1) or [])
    assert again.fatal is None and again.step == 3


def test_a_step_of_only_error_records_stops_the_run_naming_the_error(tmp_path: Path) -> None:
    """Not "equal rewards": there were none (a verifiers harness that could not start)."""
    orch = orchestrator(tmp_path)
    failed = [record(i, 0, 0, error="verifiers.HarnessError") for i in range(4)]
    orch.batches.ready = [orch.stages[0].algorithm.screen("d0", 0, failed, 0)]
    orch._write_step(orch.batches.take(0, 0, 8, 1) or [])
    assert isinstance(orch.fatal, TrainingStopped)
    assert "every rollout of step 0 (4) was an error" in str(orch.fatal)
    assert "verifiers.HarnessError: x" in str(orch.fatal)


STAGES = [
    ("stages", [
        {"name": "a", "max_steps": 2, "orchestrator": {"batch_size": 4}},
        {"name": "b", "max_steps": 2, "orchestrator": {"env": {"args": {"tasks": 2}}}},
    ]),
    ("max_steps", 4),
]  # fmt: skip


def test_groups_are_sampled_for_the_stage_of_the_step_they_will_fill(tmp_path: Path) -> None:
    config = build_config(
        [],
        [("orchestrator.batch_size", 8), ("orchestrator.rollouts_per_example", 4), *STAGES],
        env_id="unit",
    )
    loaded: list[dict[str, Any]] = []

    def load(args: dict[str, Any]) -> Any:
        loaded.append(args)
        return env(args["tasks"])

    runs = stage_runs(config, env(), load)
    assert loaded == [{"tasks": 2}] and len(runs[1].env.tasks) == 2
    assert run_at(runs, 1).stage.name == "a" and run_at(runs, 2).stage.name == "b"

    def target(step: int, version: int, have: dict[int, int]) -> int | None:
        return target_step(
            step, version, max_async_level=1, max_steps=4,
            batch_size=lambda t: run_at(runs, t).oc.batch_size,
            stage_of=lambda t: run_at(runs, t).index, have=have,
        )  # fmt: skip

    assert target(1, 1, {}) == 1  # batch 1 (stage a, 4 rollouts) first
    assert target(1, 1, {0: 4}) == 2  # then batch 2, stage b's
    assert target(1, 1, {0: 4, 1: 4}) == 2  # stage b's batch needs 8
    assert target(1, 1, {0: 4, 1: 8}) is None  # the bound: version 1 + A = 2
    assert target(1, 1, {0: 40}) == 2  # stage a's rollouts never fill stage b's batch


def test_a_group_of_an_earlier_stage_is_dropped_one_of_a_later_stage_waits(
    tmp_path: Path,
) -> None:
    orch = orchestrator(tmp_path)
    early, late, now = varied(orch, "d0", 0), varied(orch, "d1", 1), varied(orch, "d2", 2)
    early.stage, late.stage, now.stage = 0, 2, 1
    orch.batches.ready = [early, late, now]
    groups = orch.batches.take(2, 1, 4, 100)
    assert groups is not None and [g.key for g in groups] == ["d2"]
    assert orch.batches.stats.drops["stage_ended"] == 1
    assert [g.key for g in orch.batches.ready] == ["d1"]


@pytest.mark.parametrize("bad", [{"nope": 1.0}])
def test_a_stage_reward_name_unknown_to_its_env_is_refused(bad: dict[str, float]) -> None:
    from trainer_bridge.config import ConfigError

    config = build_config(
        [],
        [("stages", [{"max_steps": 1, "orchestrator": {"reward": {"weights": bad}}}])],
        env_id="unit",
    )
    with pytest.raises(ConfigError, match="'nope'"):
        stage_runs(config, env())
