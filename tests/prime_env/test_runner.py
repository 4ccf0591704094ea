"""The rollout runner: records, errors, concurrency, overlap of scoring, resume, streaming."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prime_env import (
    SCHEMA,
    ChatResponse,
    Environment,
    ModelError,
    MultiTurn,
    RolloutRecord,
    Rubric,
    SamplingArgs,
    SingleTurn,
    TaskSet,
    Usage,
    run_rollouts,
    summarize,
)

from .scripted import ScriptedClient

TASKS = [{"question": f"{i}+{i}", "answer": str(2 * i), "id": f"t{i}"} for i in range(5)]


def exact(completion, answer):
    return completion[-1]["content"] == answer


def answering_client(**kw):
    def reply(messages, tools):
        a, _ = messages[-1]["content"].split("+")
        return str(2 * int(a))

    return ScriptedClient(reply, **kw)


def numbered_env(n: int, reward: Callable[..., Any]) -> Environment:
    """`n` single-turn tasks, question and id "0", "1", …, scored by `reward` alone."""
    return Environment(
        TaskSet.from_records({"question": str(i), "id": str(i)} for i in range(n)),
        SingleTurn(),
        Rubric([reward]),
    )


def make_env(**kw):
    return Environment(
        TASKS, SingleTurn(), Rubric([exact]), name="alice/adder", version="1.0.0", **kw
    )


async def test_record_has_exactly_the_schema_fields_and_round_trips() -> None:
    records = await run_rollouts(make_env(), answering_client(), n=2, r=2, run_id="run1")
    assert [r.key for r in records] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    line = json.loads(records[0].to_json())
    assert set(line) == {
        "run_id",
        "env",
        "env_args",
        "task_id",
        "example_index",
        "rollout_index",
        "model",
        "served_model",
        "prompt",
        "completion",
        "answer",
        "info",
        "reward",
        "rewards",
        "metrics",
        "error",
        "stop_reason",
        "usage",
        "user_usage",
        "timing",
        "policy_version",
        "turns",
        "trace",
        "tools",
        "state",
    }
    assert line["state"] == {"values": {}, "unsaved": {}}  # SingleTurn keeps no state of its own
    assert line["user_usage"] is None  # no simulated user played by a model
    assert (
        line["env"] == "alice/adder@1.0.0" and line["run_id"] == "run1" and line["task_id"] == "t0"
    )
    assert line["completion"] == [{"role": "assistant", "content": "0"}]
    assert line["reward"] == 1.0 and line["stop_reason"] == "completed"
    assert line["usage"] == {"prompt_tokens": 10, "completion_tokens": 5}
    assert RolloutRecord.model_validate_json(records[0].to_json()) == records[0]
    assert SCHEMA == "prime.rollout/1"


async def test_token_ids_and_logprobs_become_turns() -> None:
    reply = ChatResponse(
        {"role": "assistant", "content": "0"}, "stop", Usage(3, 2), [1, 2, 3], [4, 5], [-0.1, -0.2]
    )
    [rec] = await run_rollouts(make_env(), ScriptedClient([reply]), n=1, policy_version=7)
    assert rec.turns[0].model_dump() == {
        "prompt_token_ids": [1, 2, 3],
        "completion_token_ids": [4, 5],
        "completion_logprobs": [-0.1, -0.2],
        "policy_version": None,
    }
    assert rec.policy_version == 7


async def test_record_version_is_its_oldest_turn() -> None:
    def reply(version: int) -> ChatResponse:
        return ChatResponse(
            {"role": "assistant", "content": "0"}, "stop", Usage(3, 1), [1], [4], [-0.1], version
        )

    harness = MultiTurn(lambda messages, state: "again", max_turns=2)
    env = Environment(TASKS, harness, Rubric([exact]), name="alice/adder", version="1.0.0")
    [rec] = await run_rollouts(env, ScriptedClient([reply(5), reply(6)]), n=1)
    assert [t.policy_version for t in rec.turns] == [5, 6]
    assert rec.policy_version == 5


async def test_model_error_is_recorded_and_excluded_from_means() -> None:
    calls = {"n": 0}

    def flaky(messages, tools):
        calls["n"] += 1
        if calls["n"] % 2 == 0:
            raise ModelError("rate_limit", "429 after 5 retries")
        return messages[-1]["content"].split("+")[0] and str(
            2 * int(messages[-1]["content"].split("+")[0])
        )

    records = await run_rollouts(make_env(), ScriptedClient(flaky), r=2, concurrency=1)
    errors = [r for r in records if r.error]
    assert len(records) == 10 and len(errors) == 5
    for rec in errors:
        assert rec.reward is None and rec.rewards == {} and rec.stop_reason == "error"
        assert rec.error.model_dump() == {"type": "rate_limit", "message": "429 after 5 retries"}
    summary = summarize(records)
    assert summary.errors == 5 and summary.error_types == {"rate_limit": 5}
    assert summary.reward_mean == 1.0  # errors are not zeros
    assert summary.scored == 5


async def test_environment_bug_is_an_error_record_not_a_crash() -> None:
    def setup(state):
        raise KeyError("missing_config")

    env = Environment(TASKS[:1], SingleTurn(setup=setup), Rubric([exact]))
    [rec] = await run_rollouts(env, answering_client())
    assert rec.error.type == "environment_error" and "KeyError" in rec.error.message


async def test_concurrency_is_bounded_and_used() -> None:
    live = {"now": 0, "max": 0}
    client = ScriptedClient(lambda m, t: "x")
    original = client.chat

    async def chat(messages, **kw):
        live["now"] += 1
        live["max"] = max(live["max"], live["now"])
        try:
            await asyncio.sleep(0.02)
            return await original(messages, **kw)
        finally:
            live["now"] -= 1

    client.chat = chat  # type: ignore[method-assign]
    env = numbered_env(40, lambda completion: 1.0)
    records = await run_rollouts(env, client, concurrency=8)
    assert len(records) == 40 and all(r.error is None for r in records)
    assert live["max"] == 8


async def test_scoring_overlaps_generation() -> None:
    """With one generation slot, rollout 0's reward waits until rollout 1 is generating:
    that only completes if scoring runs outside the generation slot."""
    second_call = asyncio.Event()
    client = ScriptedClient(lambda m, t: "x")
    original = client.chat

    async def chat(messages, **kw):
        if len(client.calls) == 1:
            second_call.set()
        return await original(messages, **kw)

    client.chat = chat  # type: ignore[method-assign]

    async def waits_for_next_generation(state):
        if state.task.id == "0":
            await asyncio.wait_for(second_call.wait(), timeout=5)
        return 1.0

    env = numbered_env(3, waits_for_next_generation)
    records = await run_rollouts(env, client, concurrency=1)
    assert [r.error for r in records] == [None, None, None]
    assert [r.reward for r in records] == [1.0, 1.0, 1.0]


async def test_a_burst_of_replies_sends_its_next_requests_before_any_scoring() -> None:
    """Four replies come back 1 ms apart: the four next requests go out before the first
    reply is scored (scoring waits for the burst to be over), and every rollout is scored."""
    client = ScriptedClient(lambda m, t: "x")
    original = client.chat
    requests = 0

    async def chat(messages, **kw):
        nonlocal requests
        requests += 1
        await asyncio.sleep(0.05 + requests * 0.001)  # the first wave: a 4 ms burst
        return await original(messages, **kw)

    client.chat = chat  # type: ignore[method-assign]
    requests_when_scored: list[int] = []

    async def counts_requests(completion):
        requests_when_scored.append(requests)
        return 1.0

    env = numbered_env(8, counts_requests)
    records = await run_rollouts(env, client, concurrency=4)
    assert [r.reward for r in records] == [1.0] * 8
    assert len(requests_when_scored) == 8 and requests_when_scored[0] == 8


async def test_a_steady_stream_of_replies_is_scored_in_batches_of_the_concurrency() -> None:
    """Replies with no quiet moment between them (an instant server) cannot wait for one:
    no more than the concurrency's worth of finished rollouts waits to be scored."""
    client = ScriptedClient(lambda m, t: "x")
    original = client.chat

    async def chat(messages, **kw):
        await asyncio.sleep(0)  # an answer by the next pass of the loop
        return await original(messages, **kw)

    client.chat = chat  # type: ignore[method-assign]
    unscored: list[int] = []

    async def counts_unscored(completion):
        unscored.append(len(client.calls) - len(unscored))
        return 1.0

    env = numbered_env(200, counts_unscored)
    records = await run_rollouts(env, client, concurrency=4)
    assert len(records) == 200 and all(r.reward == 1.0 for r in records)
    assert max(unscored) <= 2 * 4  # waiting (up to 4) plus generating (up to 4)


async def test_skip_resumes_only_missing_rollouts_and_streams_records() -> None:
    seen = []

    async def on_record(rec):
        seen.append(rec.key)

    done = {(0, 0), (0, 1), (3, 1)}
    records = await run_rollouts(
        make_env(), answering_client(), r=2, skip=done, on_record=on_record
    )
    keys = {r.key for r in records}
    assert len(records) == 7 and keys.isdisjoint(done)
    assert keys | done == {(i, j) for i in range(5) for j in range(2)}
    assert sorted(seen) == sorted(keys)


async def test_eval_tasks_used_and_invalid_arguments() -> None:
    env = Environment(TASKS, SingleTurn(), Rubric([exact]), eval_tasks=TASKS[:2])
    assert len(await run_rollouts(env, answering_client())) == 2
    with pytest.raises(ValueError, match="at least 1"):
        await run_rollouts(env, answering_client(), r=0)


def test_environment_requires_a_rubric() -> None:
    with pytest.raises(TypeError, match="needs a rubric"):
        Environment(TASKS, SingleTurn())


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(min_value=1, max_value=4),
    r=st.integers(min_value=1, max_value=3),
    done=st.sets(st.tuples(st.integers(0, 3), st.integers(0, 2)), max_size=8),
    fail_every=st.integers(min_value=0, max_value=3),
)
def test_resume_property_exactly_n_times_r_unique_records(n, r, done, fail_every) -> None:
    """Whatever was done before and whichever calls fail, the union is exactly n x r keys,
    failures are error records (never reward 0), and nothing is run twice."""
    counter = {"calls": 0}

    def reply(messages, tools):
        counter["calls"] += 1
        if fail_every and counter["calls"] % (fail_every + 1) == 0:
            raise ModelError("server_error", "injected")
        return str(2 * int(messages[-1]["content"].split("+")[0]))

    def group_bonus(completions):
        return [0.5] * len(completions)

    env = Environment(TASKS, SingleTurn(), Rubric([exact, group_bonus]))
    records = asyncio.run(
        run_rollouts(env, ScriptedClient(reply), n=n, r=r, skip=done, concurrency=3)
    )
    everything = {(i, j) for i in range(n) for j in range(r)}
    keys = [rec.key for rec in records]
    assert len(keys) == len(set(keys))
    assert set(keys) == everything - done
    assert counter["calls"] == len(keys)
    for rec in records:
        assert (rec.error is None) == (rec.reward is not None)
        if rec.error is None:
            assert rec.reward == 1.5


def test_run_rollouts_sync_outside_and_inside_a_running_loop() -> None:
    from prime_env import run_rollouts_sync

    assert len(run_rollouts_sync(make_env(), answering_client(), n=2)) == 2

    async def notebook_cell():
        return run_rollouts_sync(make_env(), answering_client(), n=3)

    assert len(asyncio.run(notebook_cell())) == 3


async def test_stream_rollouts_hands_records_out_without_keeping_them() -> None:
    """The runner keeps no record once it is handed out: a run's memory does not grow with it."""
    import gc
    import weakref

    from prime_env.runner import stream_rollouts

    refs: list[weakref.ref[RolloutRecord]] = []
    keys = []

    def on_record(rec: RolloutRecord) -> None:
        refs.append(weakref.ref(rec))
        keys.append(rec.key)

    count = await stream_rollouts(
        make_env(), answering_client(), on_record=on_record, r=3, concurrency=4
    )
    gc.collect()
    assert count == 15 and sorted(keys) == [(i, j) for i in range(5) for j in range(3)]
    assert [ref for ref in refs if ref() is not None] == []


async def test_stream_rollouts_runs_only_the_given_examples_with_whole_groups() -> None:
    from prime_env.runner import stream_rollouts

    def group_bonus(completions):
        return [0.5] * len(completions)

    env = Environment(TASKS, SingleTurn(), Rubric([exact, group_bonus]))
    got: list[RolloutRecord] = []
    await stream_rollouts(
        env, answering_client(), on_record=got.append, r=2, examples=range(1, 5, 2)
    )
    assert sorted(rec.key for rec in got) == [(1, 0), (1, 1), (3, 0), (3, 1)]
    assert all(rec.reward == 1.5 for rec in got)


def _eval_run(tmp_path, env, n: int, r: int):
    from prime_env.clients.model_specs import ModelSpec
    from prime_env.eval_run_dir import RunConfig
    from prime_env.evaluation import start_run

    spec = ModelSpec("scripted", "scripted-model", "scripted", "openai", None, None)
    config = RunConfig("adder", None, {}, "scripted", None, n, r, {})
    return start_run(env, spec, config, tmp_path)


async def test_execute_with_worker_processes_writes_each_record_once(tmp_path) -> None:
    """Two forked workers share -c and the run's results file; the parent writes every line,
    counts every record and keeps the summary (group rewards see their whole group)."""
    from prime_env.eval_run_dir import read_results
    from prime_env.evaluation import execute

    def group_bonus(completions):
        return [0.5] * len(completions)

    tasks = [{"question": f"{i}+{i}", "answer": str(2 * i), "id": f"t{i}"} for i in range(9)]
    env = Environment(tasks, SingleTurn(), Rubric([exact, group_bonus]), name="alice/adder")
    run = _eval_run(tmp_path, env, n=9, r=3)
    seen = []
    summary = await execute(
        run,
        answering_client(),
        concurrency=4,
        on_record=seen.append,
        workers=2,
        client_factory=answering_client,
    )
    records = read_results(run.results_path)
    assert sorted(rec.key for rec in records) == [(i, j) for i in range(9) for j in range(3)]
    assert len(run.results_path.read_text().splitlines()) == 27
    assert len(seen) == 27 and summary.rollouts == 27 and summary.reward_mean == 1.5
    assert json.loads(run.dir.metadata_path.read_text())["summary"]["rollouts"] == 27


async def test_a_failing_worker_process_fails_the_run_clearly(tmp_path) -> None:
    from prime_env.evaluation import execute

    def broken_factory():
        raise RuntimeError("no client in this process")

    run = _eval_run(tmp_path, make_env(), n=4, r=1)
    with pytest.raises(RuntimeError, match="worker process .* failed"):
        await execute(
            run, answering_client(), concurrency=2, workers=2, client_factory=broken_factory
        )
    with pytest.raises(ValueError, match="cannot be shared"):
        await execute(
            run, answering_client(), concurrency=1, workers=2, client_factory=answering_client
        )


@pytest.mark.timeout(120)
async def test_workers_start_together_and_a_failed_one_releases_the_others(
    tmp_path, monkeypatch
) -> None:
    """Workers wait for one another before their first request; one that dies first must not
    hold the others at the start barrier (the parent breaks it when a worker exits)."""
    import multiprocessing

    from prime_env import parallel
    from prime_env.evaluation import execute

    monkeypatch.setattr(parallel, "_START_WAIT_S", 3600.0)  # only the parent can release them

    def first_worker_fails():
        if multiprocessing.current_process().name == "prime-eval-worker-0":
            raise RuntimeError("no client in this process")
        return answering_client()

    run = _eval_run(tmp_path, make_env(), n=len(TASKS), r=1)
    with pytest.raises(RuntimeError, match="prime-eval-worker-0 .* failed"):
        await execute(
            run, answering_client(), concurrency=2, workers=2, client_factory=first_worker_fails
        )
    # the other worker ran its share (the odd examples) to the end
    assert len(run.results_path.read_text().splitlines()) == len(TASKS) // 2


async def test_a_seeded_run_gives_each_rollout_its_own_reproducible_seed() -> None:
    """r rollouts of one task must not share a seed (a server would answer r times alike), and
    each rollout's seed depends on (seed, example, rollout) only, not on scheduling."""

    async def seeds(concurrency: int, seed: int | None) -> dict[tuple[str, str], int | None]:
        client = ScriptedClient(lambda m, t: "x")
        await run_rollouts(
            make_env(), client, r=3, concurrency=concurrency, sampling=SamplingArgs(seed=seed)
        )
        seen: dict[tuple[str, str], int | None] = {}
        counts: dict[str, int] = {}
        for call in client.calls:  # one call per rollout; rollouts of a task in index order
            question = call["messages"][-1]["content"]
            counts[question] = counts.get(question, 0) + 1
            seen[(question, str(counts[question]))] = call["sampling"].seed
        return seen

    first = await seeds(1, 7)
    assert len(first) == len(TASKS) * 3
    assert len(set(first.values())) == len(first)  # all distinct
    assert all(0 <= s < 2**31 for s in first.values() if s is not None)
    assert await seeds(1, 7) == first
    assert set((await seeds(15, 7)).values()) == set(first.values())
    assert set((await seeds(1, 8)).values()).isdisjoint(first.values())
    assert set((await seeds(1, None)).values()) == {None}
