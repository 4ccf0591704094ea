"""A pool of warm sandboxes: one handed out per rollout, reset or replaced when returned.

WHY: starting a container costs hundreds of milliseconds to seconds; resetting a warm one
(kill its processes, empty /work and /tmp) costs a few. Recycling happens in the background
after release, so `acquire()` is a queue pop when the pool keeps up. A sandbox that fails its
reset, died, or reached `max_uses` is stopped and replaced by a fresh one; a replacement that
cannot start is handed to the next acquirer as a `SandboxError` (an infrastructure error it
records), never a silent hang.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine, Mapping
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, Self

from sandbox.aio import AsyncSandbox
from sandbox.errors import SandboxError
from sandbox.factory import open_sandbox, resolve_backend
from sandbox.limits import SandboxLimits


class SandboxPool:
    """`async with SandboxPool(4) as pool: async with pool.acquire() as sb: await sb.exec(...)`.

    `max_uses=None` reuses a sandbox (after a reset) until it breaks; `max_uses=1` gives every
    rollout a never-used sandbox (still started ahead of time, in the background).
    """

    def __init__(
        self,
        size: int = 4,
        backend: str = "auto",
        image: str | None = None,
        limits: SandboxLimits | None = None,
        env: Mapping[str, str] | None = None,
        max_uses: int | None = None,
    ) -> None:
        if size < 1:
            raise ValueError(f"a sandbox pool needs size >= 1, got {size}")
        if max_uses is not None and max_uses < 1:
            raise ValueError(f"max_uses must be >= 1 or None, got {max_uses}")
        self.size = size
        self.backend = backend
        self.image = image
        self.limits = limits
        self.env = dict(env or {})
        self.max_uses = max_uses
        self._ready: asyncio.Queue[AsyncSandbox | SandboxError] = asyncio.Queue()
        self._uses: dict[int, int] = {}
        self._all: set[AsyncSandbox] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._errors = 0  # SandboxErrors waiting in the queue for the next acquirers
        self._started = False
        self._closed = False

    async def start(self) -> Self:
        """Start `size` sandboxes (concurrently) and wait until they all answer."""
        if self._started:
            return self
        self._started = True
        self.backend = resolve_backend(self.backend, self.image)
        started = await asyncio.gather(
            *(self._new() for _ in range(self.size)), return_exceptions=True
        )
        failures = [item for item in started if isinstance(item, BaseException)]
        for item in started:
            if isinstance(item, AsyncSandbox):
                self._ready.put_nowait(item)
        if failures:
            await self.close()
            if isinstance(failures[0], SandboxError):
                raise SandboxError(
                    f"the sandbox pool could not start: {failures[0]}"
                ) from failures[0]
            raise failures[0]
        return self

    async def _new(self) -> AsyncSandbox:
        sandbox = AsyncSandbox(open_sandbox(self.backend, self.image, self.limits, self.env))
        self._all.add(sandbox)
        try:
            await sandbox.start()
        except BaseException:
            self._all.discard(sandbox)
            raise
        self._uses[id(sandbox)] = 0
        return sandbox

    async def _refill(self) -> None:
        try:
            self._ready.put_nowait(await self._new())
        except SandboxError as exc:
            self._errors += 1
            self._ready.put_nowait(exc)

    async def _retire(self, sandbox: AsyncSandbox) -> None:
        self._all.discard(sandbox)
        self._uses.pop(id(sandbox), None)
        await sandbox.stop()

    async def _recycle(self, sandbox: AsyncSandbox) -> None:
        if self._closed:
            await self._retire(sandbox)
            return
        worn = self.max_uses is not None and self._uses.get(id(sandbox), 0) >= self.max_uses
        if sandbox.alive and not worn:
            try:
                await sandbox.reset()
                self._ready.put_nowait(sandbox)
                return
            except (SandboxError, OSError, ValueError):
                pass
        await self._retire(sandbox)
        await self._refill()

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @asynccontextmanager
    async def acquire(self) -> AsyncIterator[AsyncSandbox]:
        """A clean, started sandbox for one rollout; recycled when the block exits."""
        if self._closed:
            raise SandboxError("the sandbox pool is closed")
        await self.start()
        item = await self._ready.get()
        if isinstance(item, SandboxError):
            self._errors -= 1
            self._spawn(self._refill())  # keep the pool's size: try again for the next caller
            raise item
        self._uses[id(item)] = self._uses.get(id(item), 0) + 1
        try:
            yield item
        finally:
            self._spawn(self._recycle(item))

    async def close(self) -> None:
        """Stop every sandbox, including ones being recycled. Idempotent."""
        self._closed = True
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
        while not self._ready.empty():
            self._ready.get_nowait()
        self._errors = 0
        await asyncio.gather(*(self._retire(sb) for sb in list(self._all)), return_exceptions=True)

    @property
    def idle(self) -> int:
        """Sandboxes ready to hand out right now."""
        return self._ready.qsize() - self._errors

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
