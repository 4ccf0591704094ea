"""A stopped run keeps its finished, untrained groups; a resume at step S takes back those
sampled by policies <= S (the ones the resumed run shares) and no other."""

from __future__ import annotations

from pathlib import Path

from tests.trainer_bridge.orchestrator.test_orchestration import orchestrator, record
from trainer_bridge.orchestrator import unbatched
from trainer_bridge.orchestrator.loop import Orchestrator


def test_saved_groups_come_back_when_their_policies_survive_the_resume(tmp_path: Path) -> None:
    orch = orchestrator(tmp_path)
    screen = orch.stages[0].algorithm.screen
    keep = screen("d4-t0", 2, [record(i, i % 2, 0, version=2) for i in range(4)], 4)
    newer = screen("d5-t1", 3, [record(i, i % 2, 0, version=3) for i in range(4)], 5)
    flat = screen("d6-t2", 2, [record(i, 1, 0, version=2) for i in range(4)], 6)
    orch.batches.ready = [keep, newer, flat]
    assert unbatched.save(orch.run, orch.batches.unbatched()) == 2  # the flat one has no signal
    taken = unbatched.take(orch.run, 2)
    assert [g.key for g in taken] == ["d4-t0"] and not orch.run.unbatched.exists()
    assert [r.rollout_index for r in taken[0].records] == [0, 1, 2, 3]


def test_the_resumed_orchestrator_batches_them_and_skips_their_tasks(
    tmp_path: Path, monkeypatch: object
) -> None:
    import random

    from trainer_bridge.checkpoints.orchestrator_state import OrchestratorState, rng_to_json

    orch = orchestrator(tmp_path)
    screen = orch.stages[0].algorithm.screen
    group = screen("d0-t0", 1, [record(i, i % 2, 0, version=1) for i in range(4)], 0)
    unbatched.save(orch.run, [group])
    state = OrchestratorState(1, 0, rng_to_json(random.Random(0)), 1, orch.digest)
    resumed = Orchestrator(
        orch.config, orch.run, orch.env, orch.sampler.make_backend, orch.children,
        orch.monitor, resume=state, log=lambda _: None,
    )  # fmt: skip
    assert [g.key for g in resumed.batches.ready] == ["d0-t0"]
    assert resumed.batches.ready[0].reused and resumed.reused == {0}
    started: list[str] = []
    resumed._run_group = lambda key, *a: started.append(key)  # type: ignore[method-assign,assignment,return-value]
    from trainer_bridge.orchestrator import loop

    real = loop.asyncio.create_task
    loop.asyncio.create_task = lambda job: job  # type: ignore[assignment,misc]
    try:
        resumed._dispatch()
    finally:
        loop.asyncio.create_task = real  # type: ignore[assignment]
    assert started and all(not key.endswith("-t0") or key.startswith("d") for key in started)
    assert resumed.tasks.cursor == len(started) + 1  # task-order index 0 was not dispatched


def test_a_teacher_scored_group_comes_back_with_its_samples_as_made(tmp_path: Path) -> None:
    """`opd` scores the policy's tokens with its teacher: the resume takes the group's samples
    back with the teacher's per-token advantages, and does not dispatch its task again."""
    import random

    from trainer_bridge.checkpoints.orchestrator_state import OrchestratorState, rng_to_json

    flags = [
        ("orchestrator.algo.type", "opd"),
        ("orchestrator.algo.teacher.model", "local/smollm2-135m"),
    ]
    orch = orchestrator(tmp_path, *flags)
    group = orch.stages[0].algorithm.screen("d0-t0", 1, [record(i, 1, 0, version=1) for i in range(4)], 0)  # fmt: skip
    group.samples = [  # as make_group leaves them: the teacher's logprobs minus the sampler's
        s.model_copy(update={"advantages": [0.0, 0.0, 0.25 * i, -0.5]})
        for i, s in enumerate(group.samples)
    ]
    assert unbatched.save(orch.run, [group]) == 1
    state = OrchestratorState(1, 0, rng_to_json(random.Random(0)), 1, orch.digest)
    resumed = Orchestrator(
        orch.config, orch.run, orch.env, orch.sampler.make_backend, orch.children,
        orch.monitor, resume=state, log=lambda _: None,
    )  # fmt: skip
    [back] = resumed.batches.ready
    assert back.key == "d0-t0" and back.reused and resumed.reused == {0}
    assert back.samples == group.samples and back.rollouts == 4 and back.version == 1
    assert back.train_rewards == group.train_rewards and back.dropped is None
