"""asyncio face of a `Sandbox`: the same methods, awaited, run on a dedicated thread pool.

WHY threads: the sandbox calls are short blocking reads on one file descriptor; a dedicated
pool (not the loop's default one, sized for CPUs) lets many rollouts wait on their sandboxes
at once without starving other `to_thread` users.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Self, TypeVar

from sandbox.backends.base import Command, Sandbox
from sandbox.result import ExecResult

T = TypeVar("T")
_EXECUTOR = ThreadPoolExecutor(
    max_workers=int(os.environ.get("PRIME_SANDBOX_THREADS", "256")), thread_name_prefix="sandbox"
)


async def run_blocking(func: Callable[[], T]) -> T:
    return await asyncio.get_running_loop().run_in_executor(_EXECUTOR, func)


class AsyncSandbox:
    """Wraps a `Sandbox`; `async with AsyncSandbox(open_sandbox()) as sb: await sb.exec(...)`."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sync = sandbox

    @property
    def backend(self) -> str:
        return self.sync.backend

    @property
    def id(self) -> str:
        return self.sync.id

    @property
    def workdir(self) -> str:
        return self.sync.workdir

    @property
    def alive(self) -> bool:
        return self.sync.alive

    async def start(self) -> Self:
        await run_blocking(self.sync.start)
        return self

    async def exec(
        self,
        cmd: Command,
        stdin: bytes | str | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> ExecResult:
        return await run_blocking(
            lambda: self.sync.exec(cmd, stdin=stdin, timeout=timeout, env=env, cwd=cwd)
        )

    async def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        await run_blocking(lambda: self.sync.write_file(path, data, mode))

    async def read_file(self, path: str, max_bytes: int | None = None) -> bytes:
        return await run_blocking(lambda: self.sync.read_file(path, max_bytes))

    async def upload_dir(self, local_dir: str | os.PathLike[str], remote_dir: str = ".") -> None:
        await run_blocking(lambda: self.sync.upload_dir(local_dir, remote_dir))

    async def reset(self) -> None:
        await run_blocking(self.sync.reset)

    async def stop(self) -> None:
        await run_blocking(self.sync.stop)

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
