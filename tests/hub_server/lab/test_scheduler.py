"""The Lab's queue: round-robin by account, a cap on queued work, futures kept per account,
and the batches of sample work (taken from the heads of the queues, joined while nothing else
waits)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from hub_server.core.errors import NotFound, RateLimited
from hub_server.lab.scheduler import Batching, FairQueue, Queued


def recorder(
    order: list[str], name: str, gate: threading.Event | None = None
) -> Callable[[], dict[str, str]]:
    def work() -> dict[str, str]:
        if gate is not None:
            gate.wait(10)
        order.append(name)
        return {"name": name}

    return work


def test_a_busy_account_delays_another_by_at_most_one_of_its_steps() -> None:
    queue = FairQueue()
    order: list[str] = []
    gate = threading.Event()
    try:
        first = queue.submit("alice", "step", recorder(order, "alice-0", gate))
        rest = [queue.submit("alice", "step", recorder(order, f"alice-{i}")) for i in range(1, 20)]
        bobs = queue.submit("bob", "step", recorder(order, "bob-0"))
        gate.set()
        assert all(f.done.wait(10) for f in (first, bobs, *rest))
    finally:
        queue.stop()
    assert order.index("bob-0") <= 2  # alice-0 was running; then at most one more of alice's
    assert [n for n in order if n.startswith("alice")] == [f"alice-{i}" for i in range(20)]
    assert bobs.result == {"name": "bob-0"}


def test_queued_work_is_capped_per_account_and_futures_are_private() -> None:
    queue = FairQueue(max_queued=2)
    gate = threading.Event()
    order: list[str] = []
    try:
        running = queue.submit("alice", "step", recorder(order, "a0", gate))
        assert running.done.wait(0.2) is False
        queue.submit("alice", "step", recorder(order, "a1"))
        queue.submit("alice", "step", recorder(order, "a2"))
        with pytest.raises(RateLimited):
            queue.submit("alice", "step", recorder(order, "a3"))
        queue.submit("bob", "step", recorder(order, "b0"))  # another account's room is its own
        with pytest.raises(NotFound):
            queue.find(running.request_id, "bob")
        assert queue.find(running.request_id, "alice") is running
    finally:
        gate.set()
        queue.stop()


def test_a_failing_request_is_an_error_on_its_future() -> None:
    queue = FairQueue()

    def wrong() -> dict[str, str]:
        raise ValueError("datum 0: 3 positions for 4 tokens")

    def broken() -> dict[str, str]:
        raise RuntimeError("out of memory")

    try:
        mistake, failure = queue.submit("a", "x", wrong), queue.submit("a", "x", broken)
        assert mistake.done.wait(10) and failure.done.wait(10)
    finally:
        queue.stop()
    assert mistake.user_error and mistake.error == "datum 0: 3 positions for 4 tokens"
    assert not failure.user_error and "out of memory" in (failure.error or "")


class Batches:
    """A `Batching` runner that records each batch (its jobs, then the joiners) and answers
    each job with its name; `holds[n]` keeps the n-th batch open until set."""

    def __init__(self, holds: dict[int, threading.Event] | None = None, joins: int = 0) -> None:
        self.seen: list[list[object]] = []
        self.holds = holds or {}
        self.joins = joins

    def run(self, items: list[Queued], more: Callable[[int], list[Queued]]) -> None:
        self.seen.append([item.job for item in items])
        hold = self.holds.get(len(self.seen) - 1)
        if hold is not None:
            hold.wait(10)
        for _ in range(self.joins):  # between two "tokens", asking with the room in use
            joined = more(sum(item.size for item in items))
            self.seen[-1].extend(item.job for item in joined)
            items = items + joined
            time.sleep(0.05)
        for item in items:
            item.future.fulfil({"job": str(item.job)})


def test_samples_waiting_at_the_heads_of_the_queues_run_as_one_batch() -> None:
    """Sample jobs at the head of each account's queue go together (one per account in turn,
    within the room); one queued behind its account's step waits for the step; the batch
    after takes what did not fit."""
    runner = Batches()
    queue = FairQueue(batching={"sample": Batching(runner.run, room=6)})
    gate = threading.Event()
    order: list[str] = []
    try:
        queue.submit("hold", "step", recorder(order, "hold", gate))
        futures = [
            queue.submit_job("alice", "sample", "a1", 2),
            queue.submit_job("alice", "sample", "a2", 2),
            queue.submit_job("bob", "sample", "b1", 2),
            queue.submit("carol", "step", recorder(order, "c-step")),
            queue.submit_job("carol", "sample", "c1", 1),
            queue.submit_job("dave", "sample", "d1", 2),
        ]
        gate.set()
        assert all(f.done.wait(10) for f in futures)
    finally:
        queue.stop()
    assert runner.seen[0] == ["a1", "b1", "d1"]  # a2 did not fit in the room of 6 rows
    assert order == ["hold", "c-step"]
    assert sorted(j for batch in runner.seen[1:] for j in batch) == ["a2", "c1"]
    assert futures[2].result == {"job": "b1"}
    with pytest.raises(ValueError, match="does not run in batches"):
        FairQueue().submit_job("alice", "sample", "x", 1)


def test_samples_join_a_running_batch_only_while_no_other_work_waits() -> None:
    """While a batch runs, samples arriving join it; once another kind of work waits at the
    head of a queue, none joins, so that work waits for one batch at most."""
    holds = {0: threading.Event(), 1: threading.Event()}
    runner = Batches(holds, joins=3)
    queue = FairQueue(batching={"sample": Batching(runner.run, room=8)})
    order: list[str] = []
    try:
        first = queue.submit_job("alice", "sample", "a1", 1)
        time.sleep(0.2)  # the batch of a1 is running (held)
        joiner = queue.submit_job("bob", "sample", "b1", 1)
        holds[0].set()
        assert joiner.done.wait(10) and first.done.wait(10)
        held = queue.submit_job("alice", "sample", "a2", 1)
        time.sleep(0.2)
        step = queue.submit("carol", "step", recorder(order, "c-step"))
        refused = queue.submit_job("bob", "sample", "b2", 1)
        holds[1].set()
        assert all(f.done.wait(10) for f in (held, step, refused))
    finally:
        queue.stop()
    # b2 could not join a2's batch: carol's step waited at the head of a queue
    assert runner.seen == [["a1", "b1"], ["a2"], ["b2"]] and order == ["c-step"]


def test_a_failing_batch_answers_every_job_it_holds() -> None:
    def broken(items: list[Queued], more: Callable[[int], list[Queued]]) -> None:
        items[0].future.fulfil({"ok": True})
        raise RuntimeError("out of memory")

    queue = FairQueue(batching={"sample": Batching(broken, room=4)})
    gate = threading.Event()
    try:
        queue.submit("hold", "step", recorder([], "hold", gate))
        answered = queue.submit_job("alice", "sample", "a", 1)
        failed = queue.submit_job("bob", "sample", "b", 1)
        gate.set()
        assert answered.done.wait(10) and failed.done.wait(10)
    finally:
        queue.stop()
    assert answered.result == {"ok": True} and answered.error is None
    assert not failed.user_error and "out of memory" in (failed.error or "")
