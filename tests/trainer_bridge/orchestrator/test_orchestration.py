"""Orchestrator rules without a model: reward re-weighting, group screening, batch assembly
(staleness), the dispatch bound, resume clean-up."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from prime_env import Environment, Rubric, SingleTurn
from prime_env.record import ErrorInfo, RolloutRecord, Turn
from trainer_bridge.checkpoints import layout, orchestrator_state
from trainer_bridge.children import ChildProcesses
from trainer_bridge.config import ConfigError
from trainer_bridge.config_loader import build_config, to_toml
from trainer_bridge.metrics import Monitor
from trainer_bridge.orchestrator.errors import TrainingStopped
from trainer_bridge.orchestrator.loop import Orchestrator
from trainer_bridge.orchestrator.rewards import reward_weights, training_reward
from trainer_bridge.protocol.policy import Probe
from trainer_bridge.protocol.run_dir import RunDir


def correct(completion: Any) -> float:
    return 0.0


def fmt(completion: Any) -> float:
    return 0.0


def env(tasks: int = 4) -> Environment:
    return Environment(
        [{"prompt": [{"role": "user", "content": f"q{i}"}], "id": f"t{i}"} for i in range(tasks)],
        SingleTurn(),
        Rubric([correct], metrics=[fmt]),
        name="unit",
    )


def record(
    i: int, correct: float, fmt: float, version: int = 0, error: str | None = None
) -> RolloutRecord:
    return RolloutRecord(
        run_id="r", env="unit", task_id="t0", example_index=0, rollout_index=i, model="m",
        prompt=[], reward=None if error else correct, rewards={} if error else {"correct": correct},
        metrics={} if error else {"fmt": fmt},
        error=ErrorInfo(type=error, message="x") if error else None, policy_version=version,
        turns=[Turn(prompt_token_ids=[1, 2], completion_token_ids=[3, 4], completion_logprobs=[-1.0, -2.0], policy_version=version)],
    )  # fmt: skip


def orchestrator(tmp_path: Path, *flags: tuple[str, Any]) -> Orchestrator:
    config = build_config(
        [],
        [("orchestrator.batch_size", 8), ("orchestrator.rollouts_per_example", 4), *flags],
        env_id="unit",
    )
    run = RunDir.new(tmp_path, "unit", "m")

    async def no_backend() -> Any:
        raise AssertionError("not used")

    return Orchestrator(
        config, run, env(), no_backend, ChildProcesses(), Monitor(run, config.monitors, None)
    )


def test_reward_weights_apply_to_training_only_and_unknown_names_are_refused() -> None:
    weights = reward_weights(env(), {"fmt": 0.5})
    assert weights == {"correct": 1.0, "fmt": 0.5}
    assert training_reward(record(0, 1.0, 1.0), weights) == 1.5
    assert training_reward(record(0, 1.0, 1.0), reward_weights(env(), {})) == 1.0
    with pytest.raises(ConfigError, match="'nope'"):
        reward_weights(env(), {"nope": 1.0})


def test_screen_drops_errors_small_and_zero_variance_groups(tmp_path: Path) -> None:
    orch = orchestrator(tmp_path)
    ok = orch.stages[0].algorithm.screen(
        "g", 0, [record(0, 1, 0), record(1, 0, 0), record(2, 0, 0, error="sampler_error")]
    )
    assert ok.dropped is None and ok.rollouts == 2 and len(ok.samples) == 2
    assert sorted(s.advantage for s in ok.samples) == [-0.5, 0.5]
    small = orch.stages[0].algorithm.screen(
        "g", 0, [record(0, 1, 0), record(1, 0, 0, error="timeout")]
    )
    assert small.dropped == "group_too_small" and small.samples == []
    flat = orch.stages[0].algorithm.screen("g", 0, [record(0, 1, 0), record(1, 1, 0)])
    assert flat.dropped == "zero_variance"
    reweighted = orchestrator(tmp_path / "b", ("orchestrator.reward.weights", {"fmt": 1.0}))
    assert (
        reweighted.stages[0].algorithm.screen("g", 0, [record(0, 1, 1), record(1, 1, 0)]).dropped
        is None
    )


def test_assembly_drops_stale_groups_and_takes_whole_groups(tmp_path: Path) -> None:
    orch = orchestrator(tmp_path)
    orch.step = 3  # S = 2: a group sampled by policy 0 is too old for batch 3
    stale = orch.stages[0].algorithm.screen(
        "old", 0, [record(i, i % 2, 0, version=0) for i in range(4)]
    )
    fresh = [
        orch.stages[0].algorithm.screen(
            f"g{k}", 2, [record(i, i % 2, 0, version=2) for i in range(4)]
        )
        for k in range(3)
    ]
    orch.batches.ready = [stale, *fresh]
    groups = orch.batches.take(orch.step, 0, 8, 100)
    assert groups is not None and [g.key for g in groups] == ["g0", "g1"]
    assert orch.batches.stats.drops["stale"] == 1 and [g.key for g in orch.batches.ready] == ["g2"]


def test_batches_take_groups_in_dispatch_order_not_completion_order(tmp_path: Path) -> None:
    orch = orchestrator(tmp_path)
    groups = [
        orch.stages[0].algorithm.screen(
            f"d{k}", 0, [record(i, i % 2, 0) for i in range(4)], order=k
        )
        for k in range(3)
    ]
    orch.batches.ready = [groups[2], groups[0], groups[1]]  # as they happened to finish
    chosen = orch.batches.take(orch.step, 0, 8, 100)
    assert chosen is not None and [g.key for g in chosen] == ["d0", "d1"]
    assert [g.key for g in orch.batches.ready] == ["d2"]


def test_an_unavailable_service_stops_the_run_and_its_errors_are_logged(tmp_path: Path) -> None:
    orch = orchestrator(tmp_path)
    records = [record(0, 0, 0), record(1, 0, 0), record(2, 0, 0, error="sandbox_unavailable")]
    orch.batches.ready.append(orch.stages[0].algorithm.screen("d0", 0, records))
    orch._stop_if_unavailable(records[:2] + [record(3, 0, 0, error="sandbox_error")])
    assert orch.fatal is None  # one sandbox failure is an error record, not a stop
    orch._stop_if_unavailable(records)
    assert "sandbox_unavailable" in str(orch.fatal)
    orch._log_unfinished_steps(str(orch.fatal))
    (row,) = [json.loads(line) for line in orch.run.metrics.read_text().splitlines()]
    assert row["step"] == 0 and row["errors/sandbox_unavailable"] == 1
    assert "sandbox_unavailable" in row["stopped"] and "trainer/loss" not in row
    assert len(orch.run.rollouts(0).read_text().splitlines()) == 3


@pytest.mark.parametrize(
    ("flags", "dtype", "tolerance"),
    [((), "float32", 1e-4), ((), "bfloat16", 1e-2), ((), None, 1e-2),
     ((("orchestrator.probe_tolerance", 0.05),), "float32", 0.05)],
)  # fmt: skip
def test_probe_tolerance_follows_the_served_precision(
    tmp_path: Path, flags: tuple[tuple[str, Any], ...], dtype: str | None, tolerance: float
) -> None:
    orch = orchestrator(tmp_path, *flags)
    orch.sampler.backend = SimpleNamespace(dtype=dtype) if dtype else object()  # type: ignore[assignment]
    assert orch.sampler.probe_tolerance() == tolerance


async def test_fp32_probe_catches_a_policy_that_moved_by_one_tiny_step(tmp_path: Path) -> None:
    """9.7e-3: the smallest probe change one step made on the tiny model (1e-2 let it pass)."""
    orch = orchestrator(tmp_path)
    probe = Probe([1, 2, 3], [-1.0, -2.0])

    class Stale:
        dtype = "float32"

        async def score(self, version: int, token_ids: list[int]) -> list[float]:
            return [-1.0, -2.0 + 9.7e-3]

    orch.sampler.backend = Stale()  # type: ignore[assignment]
    with pytest.raises(TrainingStopped, match="tolerance 0.0001"):
        await orch.sampler.probe(1, probe)


@pytest.mark.parametrize(("level", "groups"), [(0, 2), (1, 4)])
def test_dispatch_bound_sync_and_async(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, level: int, groups: int
) -> None:
    orch = orchestrator(tmp_path, ("orchestrator.max_async_level", level))
    started: list[str] = []

    def fake_run(key: str, *args: Any) -> str:
        started.append(key)
        return key

    monkeypatch.setattr(orch, "_run_group", fake_run)
    monkeypatch.setattr("trainer_bridge.orchestrator.loop.asyncio.create_task", lambda job: job)
    orch._dispatch()
    assert len(started) == groups  # one batch in flight (A=0) or two (A=1)
    assert len({key.split("-", 1)[1] for key in started}) == groups  # distinct tasks
    orch._dispatch()
    assert len(started) == groups  # nothing more until groups finish


def test_discard_after_keeps_each_step_once(tmp_path: Path) -> None:
    run = RunDir.new(tmp_path, "e", "m")
    for step in range(5):
        for parent in ("batches", "broadcasts", "checkpoints"):
            (run.root / parent / f"step_{step}").mkdir(parents=True)
        run.rollouts(step).write_text("{}\n")
    run.metrics.write_text("".join(json.dumps({"step": s}) + "\n" for s in range(4)) + '{"ste')
    layout.discard_after(run, 2)
    assert sorted(p.name for p in (run.root / "batches").iterdir()) == ["step_0", "step_1"]
    assert sorted(p.name for p in (run.root / "broadcasts").iterdir()) == [
        "step_0",
        "step_1",
        "step_2",
    ]
    assert [json.loads(x)["step"] for x in run.metrics.read_text().splitlines()] == [0, 1]
    assert not run.rollouts(2).exists() and run.rollouts(1).exists()


def test_checkpoint_is_stable_only_with_both_halves(tmp_path: Path) -> None:
    run = RunDir.new(tmp_path, "e", "m")
    state = orchestrator_state.OrchestratorState(3, 12, [3, [1, 2], None], 3, "digest")
    orchestrator_state.save(run, state, keep_last=2)
    assert orchestrator_state.latest(run) is None  # the trainer's half is missing
    trainer = layout.trainer_part(run, 3)
    trainer.mkdir(parents=True)
    (trainer / "STABLE").write_text("")
    assert layout.complete(run, 3)
    loaded = orchestrator_state.latest(run)
    assert loaded is not None and loaded.step == 3 and loaded.task_cursor == 12


def test_resume_refuses_a_changed_config_listing_the_keys(tmp_path: Path) -> None:
    from registry_index.files import write_atomic
    from trainer_bridge import launch

    config = build_config([], [("max_steps", 4)], env_id="x/y")
    run = RunDir.new(tmp_path, "x", "m")
    write_atomic(run.resolved_config, to_toml(config))
    run.update_run_json(env="x/y")
    with pytest.raises(ConfigError) as caught:
        launch.resume(
            run.root,
            lambda c: c.model_copy(
                update={"orchestrator": c.orchestrator.model_copy(update={"batch_size": 16})}
            ),
        )
    assert "orchestrator.batch_size: run has 64, now 16" in str(caught.value)
    longer = launch.resume(run.root, lambda c: c.model_copy(update={"max_steps": 9}))
    assert longer.config.max_steps == 9 and longer.resume is None  # no checkpoint yet: step 0
    assert "max_steps = 9" in run.resolved_config.read_text()


async def test_no_model_call_is_sampled_by_a_policy_before_its_probe_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A multi-turn rollout keeps calling the model while policy 1 is loaded: its call already
    in flight finishes on policy 0 before the load, and a later turn asked for during the load
    or the probe waits until the probe has passed, then is sampled by policy 1."""
    import asyncio

    from prime_env.clients.base import ChatResponse, Usage
    from trainer_bridge.orchestrator.sampler import GuardedClient
    from trainer_bridge.protocol.policy import PolicyRef

    orch = orchestrator(tmp_path)
    probe = Probe([1, 2, 3], [-1.0, -2.0])
    ref = PolicyRef(version=1, path=tmp_path, kind="lora", sha256="x")
    monkeypatch.setattr(
        "trainer_bridge.orchestrator.sampler.read_policy", lambda path: (ref, probe)
    )
    events: list[str] = []
    finish_first = asyncio.Event()

    class Backend:
        dtype = "float32"
        model, provider, base_url = "m", "fake", None
        version = 0

        async def chat(self, messages: Any, **kwargs: Any) -> ChatResponse:
            if messages == "turn 1":
                await finish_first.wait()  # still generating when the trainer's policy arrives
            events.append(f"{messages} sampled by {self.version}")
            return ChatResponse(message={"role": "assistant", "content": "x"}, finish_reason="stop",
                                usage=Usage(), policy_version=self.version)  # fmt: skip

        async def publish(self, policy: PolicyRef) -> None:
            events.append("load 1")
            self.version = policy.version  # every call from now on is sampled by policy 1

        async def score(self, version: int, token_ids: list[int]) -> list[float]:
            events.append("probe 1 scored")
            await asyncio.sleep(0.05)  # the rollout asks for its next turn meanwhile
            return probe.logprobs

    backend = Backend()
    orch.sampler.backend = backend  # type: ignore[assignment]
    orch.sampler.published = {0}
    client = GuardedClient(backend, 30.0, orch.sampler.check_version, orch.sampler.gate)
    first = asyncio.create_task(client.chat("turn 1"))  # type: ignore[arg-type]
    await asyncio.sleep(0.01)
    load = asyncio.create_task(orch.sampler.publish(1))
    await asyncio.sleep(0.01)
    second = asyncio.create_task(client.chat("turn 2"))  # type: ignore[arg-type]
    await asyncio.sleep(0.01)
    assert events == []  # the load waits for the call in flight; the new turn waits for both
    finish_first.set()
    await asyncio.gather(first, load, second)
    assert events == ["turn 1 sampled by 0", "load 1", "probe 1 scored", "turn 2 sampled by 1"]
