"""The collector settings a run of many rollouts gets (prime_env.process.gc_tuning)."""

from __future__ import annotations

import gc
from typing import Any

from prime_env import Environment, Rubric, SingleTurn
from prime_env.process.gc_tuning import YOUNG_THRESHOLD, rollout_gc, young_threshold
from tests.prime_env.scripted import ScriptedClient


def test_the_young_threshold_grows_with_the_concurrency_and_is_restored_after() -> None:
    before = gc.get_threshold()
    assert young_threshold(1) == young_threshold(128) == YOUNG_THRESHOLD
    assert young_threshold(1024) > young_threshold(512) > YOUNG_THRESHOLD
    with rollout_gc(1024):
        assert gc.get_threshold() == (young_threshold(1024), *before[1:])
        assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


async def test_a_wide_run_does_not_collect_its_own_working_set(tmp_path) -> None:
    """1,024 rollouts in flight keep more objects alive than a fixed threshold of 20,000:
    collections then walk them all and free nothing (a pause of milliseconds inside a burst of
    replies). A run's threshold leaves room for its concurrency, so none happens."""
    from prime_env.clients.model_specs import ModelSpec
    from prime_env.eval_run_dir import RunConfig
    from prime_env.evaluation import execute, start_run

    width = 1024

    async def correct(completion: list[dict[str, Any]], answer: str) -> float:
        return float(completion[-1]["content"] == answer)

    tasks = [{"question": f"say {i}", "answer": str(i), "id": f"t{i}"} for i in range(width)]
    env = Environment(tasks, SingleTurn(), Rubric([correct]), name="alice/say")
    spec = ModelSpec("scripted", "scripted-model", "scripted", "openai", None, None)
    run = start_run(env, spec, RunConfig("say", None, {}, "scripted", None, width, 1, {}), tmp_path)
    client = ScriptedClient(lambda messages, tools: messages[-1]["content"].split()[-1], delay=0.2)
    during_run: list[int] = []  # generations collected during the run

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and gc.get_freeze_count():  # inside the run's rollout_gc block
            during_run.append(info["generation"])

    gc.callbacks.append(count)
    try:
        summary = await execute(run, client, concurrency=width)
    finally:
        gc.callbacks.remove(count)
    assert summary.rollouts == width and summary.reward_mean == 1.0
    assert during_run == []
