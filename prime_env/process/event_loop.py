"""The event loop that rollouts run on: uvloop where it is installed, with aiohttp's request
bodies sent within the call that sends them.

Why uvloop: at a hundred-plus requests in flight one event loop is CPU-bound, and uvloop's
loop costs less per request.

Why the task factory: aiohttp writes each request body from a task of its own, which Python
3.12+ starts eagerly but 3.11 leaves for the loop's next pass, behind every ready callback.
On 3.11 this factory gives that one coroutine what 3.12 does: its first step runs inside
`create_task`, and only a body that has to wait (a full socket buffer) gets a task for the
rest; every other task is made as before. The wait it removes: docs/benchmarks.md, session 8.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(coro)` on uvloop where it is installed, with eager request-body writes."""

    async def main() -> T:
        eager_request_bodies(asyncio.get_running_loop())
        return await coro

    try:
        import uvloop
    except ImportError:
        return asyncio.run(main())
    return uvloop.run(main())


def eager_request_bodies(loop: asyncio.AbstractEventLoop) -> None:
    """On Python 3.11, start aiohttp's request-body writers eagerly on `loop` (3.12+ does)."""
    if sys.version_info >= (3, 12):
        return
    try:
        from aiohttp.client_reqrep import ClientRequest
    except ImportError:
        return
    writer_code = ClientRequest.write_bytes.__code__
    chained = loop.get_task_factory()

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Future[Any]:
        if getattr(coro, "cr_code", None) is writer_code:
            return _started(loop, coro)
        if chained is not None:
            return chained(loop, coro, **kwargs)  # type: ignore[arg-type]
        return asyncio.Task(coro, loop=loop, **kwargs)

    loop.set_task_factory(factory)  # type: ignore[arg-type]


def _started(loop: asyncio.AbstractEventLoop, coro: Any) -> asyncio.Future[Any]:
    """Run `coro`'s first step now; a done future if that finished it (aiohttp drops a done
    writer), else a task that carries on from where it waits."""
    done: asyncio.Future[Any] = loop.create_future()
    try:
        waiting = coro.send(None)
    except StopIteration as stop:
        done.set_result(stop.value)
    except (KeyboardInterrupt, SystemExit):
        raise
    except asyncio.CancelledError:
        done.cancel()
    except BaseException as error:  # noqa: BLE001 - a task would hold it; so does the future
        done.set_exception(error)
        done.exception()  # aiohttp never reads a done writer: not a "never retrieved" warning
    else:
        return asyncio.Task(_resumed(coro, waiting), loop=loop)
    return done


async def _resumed(coro: Any, waiting: Any) -> Any:
    """Drive `coro` on from a step that yielded `waiting`, as its own task would have."""
    while True:
        try:
            if waiting is None:
                await asyncio.sleep(0)  # a bare yield: one pass of the loop
            else:
                # Taken over from the coroutine's own await, as a task takes it (a future
                # still marked as blocking someone refuses a second await).
                waiting._asyncio_future_blocking = False
                await waiting
        except asyncio.CancelledError as cancelled:
            try:
                waiting = coro.throw(cancelled)
            except StopIteration as stop:
                return stop.value
            continue
        except BaseException:  # noqa: BLE001, S110 - the coroutine reads its future's outcome
            pass
        try:
            waiting = coro.send(None)
        except StopIteration as stop:
            return stop.value
