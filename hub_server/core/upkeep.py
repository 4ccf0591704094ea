"""Background upkeep of a running hub: jobs that must not wait for the next restart.

Each worker runs the jobs every `interval` seconds (expired upload reservations and their
staged bytes, eval runs abandoned while `running`); the jobs are idempotent, so N workers
doing the same sweep is harmless.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence

from starlette.concurrency import run_in_threadpool

log = logging.getLogger(__name__)

Job = Callable[[], object]


async def _loop(interval: float, jobs: Sequence[Job]) -> None:
    while True:
        await asyncio.sleep(interval)
        for job in jobs:
            try:
                await run_in_threadpool(job)
            except Exception:  # a failed sweep is retried next time; never kill the loop
                log.exception("hub upkeep job %s failed", getattr(job, "__name__", job))


@contextlib.asynccontextmanager
async def periodic(interval: float, jobs: Sequence[Job]) -> AsyncIterator[None]:
    """Run `jobs` every `interval` seconds while the context is open."""
    task = asyncio.create_task(_loop(interval, jobs))
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
