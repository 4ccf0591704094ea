"""Processes that die with their parent: Linux's PR_SET_PDEATHSIG, set in the process itself.

trainer_bridge.children sets it in each child between fork and exec; the trainer sets it again for
itself, because torchrun starts its workers in sessions of their own, beyond the reach of the
process-group kill of ChildProcesses.stop_all, and they would outlive an orchestrator killed by SIGKILL.
"""

from __future__ import annotations

import ctypes
import signal
import sys

PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """SIGKILL this process when the thread that started it exits (Linux only: elsewhere the
    process group suffices). Async-signal-safe: usable as a `preexec_fn`."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
