"""The Lab's queue: one worker thread runs every tenant's work, fairly.

Work is queued per account and taken round-robin by account (one item of each account in
turn), so a tenant that queues many steps delays another's next step by at most one of its
own. Each account may hold `max_queued` items at once (beyond that, a submission is refused
with 429 and the SDK retries later). Within an account, items run in the order they came,
which keeps a training client's forward_backward, optim_step and save in its own order.
Results are kept as futures (by request id) until fetched and for `keep_seconds` after.
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


@dataclass
class Future:
    """One request's outcome: `result` (a JSON dict or protobuf bytes) or `error`."""

    request_id: str
    account: str
    kind: str
    done: threading.Event = field(default_factory=threading.Event)
    result: dict[str, Any] | bytes | None = None
    error: str | None = None
    user_error: bool = False
    finished_at: float | None = None
    waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = field(default_factory=list)

    def finish(self) -> None:
        """Mark done and wake every long poll waiting on it (from the worker thread)."""
        self.finished_at = time.monotonic()
        self.done.set()
        for loop, event in self.waiters:
            loop.call_soon_threadsafe(event.set)


@dataclass
class _Item:
    future: Future
    work: Callable[[], dict[str, Any] | bytes]


class FairQueue:
    """Round-robin by account over per-account FIFO queues, run by one daemon thread."""

    def __init__(self, max_queued: int = 64, keep_seconds: float = 600.0) -> None:
        self.max_queued = max_queued
        self.keep_seconds = keep_seconds
        self._queues: OrderedDict[str, deque[_Item]] = OrderedDict()
        self._futures: dict[str, Future] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="lab-worker", daemon=True)
        self._thread.start()

    def submit(self, account: str, kind: str, work: Callable[[], dict[str, Any] | bytes]) -> Future:
        """Queue `work` for `account`; its Future, to be fetched by request id."""
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
            queue.append(_Item(future, work))
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
        with self._lock:
            if future.done.is_set():
                return True
            future.waiters.append(waiter)
        try:
            await asyncio.wait_for(event.wait(), seconds)
        except TimeoutError:
            pass
        finally:
            with self._lock:
                future.waiters.remove(waiter)
        return future.done.is_set()

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            self._lock.notify_all()
        self._thread.join(timeout=30)

    def _next(self) -> _Item | None:
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

    def _run(self) -> None:
        while (item := self._next()) is not None:
            future = item.future
            try:
                future.result = item.work()
            except ValueError as error:  # the caller's mistake: its message is the answer
                future.error, future.user_error = str(error), True
            except Exception as error:
                log.exception("Lab request %s failed", future.request_id)
                future.error = f"The Lab failed on this request: {type(error).__name__}: {error}"
            with self._lock:
                future.finish()
            self._forget_old()

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
