"""The worker protocol end to end with an environment of this SDK served out of process: the
same records as in-process, model calls through the interception server, and a worker that
dies mid-run gives error records, never zeros."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Iterator

import pytest

import prime_env as pe
from prime_env.clients.openai_client import OpenAIClient
from prime_env.remote import RemoteEnvironment, WorkerProcess
from prime_env.remote.process import WORKER_DIED
from testing.server import FakeServer
from tests.e2e.eval_support import SAY_ENV


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeServer]:
    with FakeServer("openai") as server:
        yield server


@pytest.fixture
def remote() -> Iterator[RemoteEnvironment]:
    worker = WorkerProcess(
        sys.executable, "prime_env", str(SAY_ENV), {"num_tasks": 6, "wrong_every": 3}
    )
    env = RemoteEnvironment(worker.start(), name="say", version=None)
    yield env
    env.close()


async def test_out_of_process_records_match_in_process(
    remote: RemoteEnvironment, fake: FakeServer
) -> None:
    local = pe.load(str(SAY_ENV), num_tasks=6, wrong_every=3)
    assert [t.id for t in remote.tasks] == [t.id for t in local.tasks]
    assert remote.rubric.weights == {"exact": 1.0}
    client = OpenAIClient("fake", base_url=fake.url, api_key="k")
    try:
        there = await pe.run_rollouts(remote, client, n=6, r=2, concurrency=4)
        here = await pe.run_rollouts(local, client, n=6, r=2, concurrency=4)
    finally:
        await client.aclose()
    assert [r.reward for r in there] == [r.reward for r in here]
    assert [r.reward for r in there].count(0.0) == 4  # the known wrong tasks, scored 0
    assert [r.metrics for r in there] == [r.metrics for r in here]
    assert [r.completion for r in there] == [r.completion for r in here]
    assert all(r.error is None and r.trace is not None for r in there)


async def test_a_worker_that_dies_gives_error_records(
    remote: RemoteEnvironment, fake: FakeServer
) -> None:
    fake.configure(latency_ms=400)
    client = OpenAIClient("fake", base_url=fake.url, api_key="k")

    async def kill_soon() -> None:
        await asyncio.sleep(0.2)
        os.killpg(remote.worker._proc.pid, signal.SIGKILL)  # type: ignore[union-attr]

    try:
        killer = asyncio.ensure_future(kill_soon())
        records = await pe.run_rollouts(remote, client, n=4, r=1, concurrency=4)
        await killer
    finally:
        fake.configure(latency_ms=0)
        await client.aclose()
    assert len(records) == 4
    for record in records:
        assert record.reward is None and record.rewards == {}
        assert record.error is not None and record.error.type == WORKER_DIED
