"""SIGTERM/SIGINT for a run: the training task cancelled, and a hard bound on the way out."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
from typing import Any

from trainer_bridge.children import ChildDied, ChildProcesses
from trainer_bridge.orchestrator.errors import TrainingStopped
from trainer_bridge.protocol.run_dir import RunDir

SHUTDOWN_BOUND_S = 60.0


class ShutdownGuard:
    """SIGTERM/SIGINT handling for a run, and the hard bound on its way out.

    The first signal cancels the training task (in-flight rollouts are cancelled, the sampler
    stops between two tokens, the children are stopped, run.json says `interrupted`) and arms
    a timer: if the process has not finished exiting `bound_s` later, the timer kills the
    children, writes run.json and leaves with `os._exit`, whatever is still running (a worker
    thread in a C call, a hung close). A second signal takes that exit at once. The end of a
    run arms the same timer, so a teardown that hangs (an eval or a batch still in flight at
    max_steps, prime-rl#2912) is bounded too.
    """

    def __init__(self, run: RunDir, children: ChildProcesses, bound_s: float = SHUTDOWN_BOUND_S):
        self.run = run
        self.children = children
        self.bound_s = bound_s
        self.signum: int | None = None
        self.status, self.code, self.message = "interrupted", 1, "interrupted"
        self._timer: threading.Timer | None = None
        self._previous: dict[int, Any] = {}

    @property
    def exit_code(self) -> int:
        """128 + the signal's number, as a shell reports it (130 Ctrl-C, 143 SIGTERM)."""
        return 128 + (self.signum or signal.SIGINT)

    def install(self) -> None:
        """Plain handlers for the code outside the event loop (set-up and teardown); only
        the main thread may set them (a run started from another thread keeps the caller's)."""
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous = signal.signal(sig, self._on_signal)
            self._previous.setdefault(sig, previous)

    def restore(self) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        if self._timer is not None:
            self._timer.cancel()

    def _on_signal(self, signum: int, _frame: Any) -> None:
        self.signalled(signum)
        raise KeyboardInterrupt

    def signalled(self, signum: int) -> None:
        """Record the first signal and arm the bound (the caller then cancels what runs);
        a second signal exits now."""
        if self.signum is not None:
            self.expire()
        self.signum = signum
        self.arm("interrupted", self.exit_code, f"interrupted by {signal.Signals(signum).name}")

    def arm(self, status: str, code: int, message: str) -> None:
        """From now on the process has `bound_s` to exit; if it does not, exit as `status`
        (after a signal, always as `interrupted`)."""
        if self.signum is None or status == "interrupted":
            self.status, self.code, self.message = status, code, message
        if self._timer is None:
            self._timer = threading.Timer(self.bound_s, self.expire)
            self._timer.daemon = True
            self._timer.start()

    def expire(self) -> None:
        message = f"{self.message}; shutdown exceeded {self.bound_s:.0f} s, exited regardless"
        try:
            sys.stderr.write(f"{message}\nresume with: prime train resume {self.run.root}\n")
            self.children.stop_all(grace_s=0)
            self.run.set_status(self.status, error=message)
        finally:
            os._exit(self.code)


async def until_signalled(coro: Any, guard: ShutdownGuard) -> None:
    """Run `coro`; SIGTERM or SIGINT (a scheduler, Ctrl-C) cancels it, so in-flight rollouts
    are cancelled and the children stopped on the way out, within the guard's bound. The
    loop's own handlers: a `signal.signal` handler would only run between bytecodes, which
    the event loop may not reach while it waits."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(coro)

    def on_signal(signum: int) -> None:
        guard.signalled(signum)
        task.cancel()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig)
    outcome = ("failed", 1, "stopped")
    try:
        await task
        outcome = ("completed", 0, "")
    except (TrainingStopped, ChildDied) as exc:
        outcome = ("failed", 1, str(exc))
        raise
    finally:
        # The loop's teardown waits for its worker threads: from here on the bound holds.
        guard.arm(*outcome)
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
