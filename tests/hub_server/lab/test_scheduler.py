"""The Lab's queue: round-robin by account, a cap on queued work, futures kept per account."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from hub_server.core.errors import NotFound, RateLimited
from hub_server.lab.scheduler import FairQueue


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
