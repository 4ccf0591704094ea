"""The Lab's queue: one worker thread runs every tenant's work, fairly.

Work is queued per account and taken round-robin by account (one item of each account in
turn), so a tenant that queues many steps delays another's next step by at most one of its
own. Each account may hold `max_queued` items at once (beyond that, a submission is refused
with 429 and the SDK retries later). Within an account, items run in the order they came,
which keeps a training client's forward_backward, optim_step and save in its own order.
Results are kept as futures (by request id) until fetched and for `keep_seconds` after.

A kind of work may run in batches (`Batching`; the Lab's samples): when an item of that kind
comes up, the items of the same kind at the head of every account's queue go with it (one per
account in turn, up to the batch's room), and while the batch runs, more join it as they come,
but only while no other kind of work waits at the head of a queue: a batch then drains, and
the other work's delay stays one batch, as it was one item.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hub_server.core.errors import NotFound, RateLimited

log = logging.getLogger(__name__)

LONG_POLL_SECONDS = 30.0


Result = dict[str, Any] | bytes


@dataclass
class Future:
    """One request's outcome: `result` (a JSON dict or protobuf bytes) or `error`."""

    request_id: str
    account: str
    kind: str
    done: threading.Event = field(default_factory=threading.Event)
    result: Result | None = None
    error: str | None = None
    user_error: bool = False
    finished_at: float | None = None
    waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self, work: Callable[[], Result]) -> None:
        """Settle with what `work` returns, or the error it raises."""
        try:
            result = work()
        except ValueError as error:
            self.fail(error)
        except Exception as error:
            log.exception("Lab request %s failed", self.request_id)
            self.fail(error)
        else:
            self.fulfil(result)

    def fulfil(self, result: Result) -> None:
        self.result = result
        self._finish()

    def fail(self, error: Exception) -> None:
        """A `ValueError` is the caller's mistake (its message is the answer); anything
        else is the Lab's."""
        if isinstance(error, ValueError):
            self.error, self.user_error = str(error), True
        else:
            self.error = f"The Lab failed on this request: {type(error).__name__}: {error}"
        self._finish()

    def _finish(self) -> None:
        """Mark done and wake every long poll waiting on it (from the worker thread)."""
        with self.lock:
            self.finished_at = time.monotonic()
            self.done.set()
            for loop, event in self.waiters:
                loop.call_soon_threadsafe(event.set)


@dataclass
class Queued:
    """A queued request: its future and its work, or the `job` a batch of its kind runs
    (taking `size` of the batch's room)."""

    future: Future
    work: Callable[[], Result] | None = None
    job: object = None
    size: int = 1


@dataclass(frozen=True)
class Batching:
    """How a kind of work runs in batches: `run(items, more)` runs `items` and settles each
    one's future, asking `more(used)` between its steps for items that join (with `used` of
    the `room` taken); items of more than `room` never batch with others."""

    run: Callable[[list[Queued], Callable[[int], list[Queued]]], None]
    room: int


class FairQueue:
    """Round-robin by account over per-account FIFO queues, run by one daemon thread."""

    def __init__(
        self,
        max_queued: int = 64,
        keep_seconds: float = 600.0,
        batching: dict[str, Batching] | None = None,
    ) -> None:
        self.max_queued = max_queued
        self.keep_seconds = keep_seconds
        self.batching = batching or {}
        self._queues: OrderedDict[str, deque[Queued]] = OrderedDict()
        self._futures: dict[str, Future] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="lab-worker", daemon=True)
        self._thread.start()

    def submit(self, account: str, kind: str, work: Callable[[], Result]) -> Future:
        """Queue `work` for `account`; its Future, to be fetched by request id."""
        return self._submit(account, kind, lambda future: Queued(future, work))

    def submit_job(self, account: str, kind: str, job: object, size: int) -> Future:
        """Queue `job` of a batched `kind` (its `Batching` runs it) for `account`."""
        if kind not in self.batching:
            raise ValueError(f"{kind!r} work does not run in batches here")
        return self._submit(account, kind, lambda future: Queued(future, job=job, size=size))

    def _submit(self, account: str, kind: str, item: Callable[[Future], Queued]) -> Future:
        with self._lock:
            queue = self._queues.setdefault(account, deque())
            if len(queue) >= self.max_queued:
                raise RateLimited(
                    f"This account has {len(queue)} requests queued on the Lab (the most it "
                    "may); wait for some to finish.",
                    1,
                )
            future = Future(f"lab-{next(self._ids)}-{kind}", account, kind)
            self._futures[future.request_id] = future
            queue.append(item(future))
            self._lock.notify()
        return future

    def queued(self, account: str) -> int:
        with self._lock:
            return len(self._queues.get(account, ()))

    def find(self, request_id: str, account: str) -> Future:
        """The account's future `request_id`; another account's is 404 as an unknown one."""
        with self._lock:
            future = self._futures.get(request_id)
        if future is None or future.account != account:
            raise NotFound(f"No request {request_id!r} on this Lab for this account.")
        return future

    async def wait(self, future: Future, seconds: float = LONG_POLL_SECONDS) -> bool:
        """Wait up to `seconds` for `future`; whether it is done (a long poll: an asyncio
        event the worker sets, no thread and no polling)."""
        event = asyncio.Event()
        waiter = (asyncio.get_running_loop(), event)
        with future.lock:
            if future.done.is_set():
                return True
            future.waiters.append(waiter)
        try:
            await asyncio.wait_for(event.wait(), seconds)
        except TimeoutError:
            pass
        finally:
            with future.lock:
                future.waiters.remove(waiter)
        return future.done.is_set()

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            self._lock.notify_all()
        self._thread.join(timeout=30)

    def _next(self) -> Queued | None:
        """The first queued item of the account next in turn; that account goes last."""
        with self._lock:
            while not self._stopped:
                for account, queue in self._queues.items():
                    if queue:
                        item = queue.popleft()
                        self._queues.move_to_end(account)
                        return item
                self._lock.wait()
            return None

    def _take(self, kind: str, room: int, joining: bool) -> list[Queued]:
        """Items of `kind` from the heads of the queues, one per account in turn, each that
        fits in the `room` left; none while `joining` and another kind waits at a head."""
        taken: list[Queued] = []
        with self._lock:
            heads = [q[0].future.kind for q in self._queues.values() if q]
            if joining and any(k != kind for k in heads):
                return taken
            progress = True
            while progress:
                progress = False
                for account, queue in list(self._queues.items()):
                    if queue and queue[0].future.kind == kind and queue[0].size <= room:
                        item = queue.popleft()
                        room -= item.size
                        taken.append(item)
                        self._queues.move_to_end(account)
                        progress = True
        return taken

    def _run(self) -> None:
        while (item := self._next()) is not None:
            if item.work is not None:
                item.future.run(item.work)
            else:
                self._run_batch(item, self.batching[item.future.kind])
            self._forget_old()

    def _run_batch(self, first: Queued, batching: Batching) -> None:
        kind = first.future.kind
        items = [first, *self._take(kind, batching.room - first.size, joining=False)]

        def more(used: int) -> list[Queued]:
            joined = self._take(kind, batching.room - used, joining=True)
            items.extend(joined)
            return joined

        try:
            batching.run(list(items), more)
        except Exception as error:  # the batch broke: whoever it had not answered hears why
            log.exception("Lab batch of %d %s requests failed", len(items), kind)
            for item in items:
                if not item.future.done.is_set():
                    item.future.fail(error)

    def _forget_old(self) -> None:
        cutoff = time.monotonic() - self.keep_seconds
        with self._lock:
            old = [
                rid
                for rid, f in self._futures.items()
                if f.finished_at is not None and f.finished_at < cutoff
            ]
            for rid in old:
                del self._futures[rid]
