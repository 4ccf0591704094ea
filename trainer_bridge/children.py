"""The child processes of a run (the trainer, vLLM servers), watched so that a dead child
stops the run with its log tail, and stopped together on the way out (engines/process.py says
how each is started so that it dies with the run).
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from engines.process import Child, ChildDied, StartFailed

__all__ = ["Child", "ChildDied", "ChildProcesses", "StartFailed"]


class ChildProcesses:
    """Starts children, reports the first one to die, and stops them all on the way out."""

    def __init__(self) -> None:
        self.started: list[Child] = []

    def start(
        self,
        name: str,
        argv: Sequence[str],
        log: Path,
        *,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> Child:
        child = Child(name, list(argv), log, env=env, cwd=cwd)
        child.start()
        self.started.append(child)
        return child

    def check(self) -> None:
        for child in self.started:
            child.check()

    async def watch(self, interval_s: float = 0.5) -> None:
        """Return never; raise ChildDied as soon as any child exits."""
        while True:
            self.check()
            await asyncio.sleep(interval_s)

    def wait_exit(self, name: str, timeout_s: float) -> None:
        """Give child `name` up to `timeout_s` to exit on its own: a trainer that finished its
        last step ends by itself, and torchrun SIGTERMed while its ranks tear down prints a
        traceback into the run's log."""
        for child in self.started:
            if child.name == name and child.proc is not None:
                try:
                    child.proc.wait(timeout=timeout_s)
                except subprocess.TimeoutExpired:
                    pass

    def stop_all(self, grace_s: float = 10.0) -> None:
        deadline = time.monotonic() + grace_s
        for child in reversed(self.started):
            child.stop(max(0.5, deadline - time.monotonic()))
