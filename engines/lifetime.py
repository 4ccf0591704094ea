"""Processes that die with their parent (Linux's PR_SET_PDEATHSIG, set in the process itself),
and an owner that reaps the whole tree it started (PR_SET_CHILD_SUBREAPER).

engines.process sets it in each child between fork and exec; the trainer sets it again for
itself, because torchrun starts its workers in sessions of their own, beyond the reach of the
process-group kill of ChildProcesses.stop_all, and they would outlive an orchestrator killed by SIGKILL.
vLLM's engine and worker processes are Python processes its server spawns: they set it for
themselves through `child_site/sitecustomize.py`, which runs this file. Standard library only,
for that reason.
"""

from __future__ import annotations

import ctypes
import signal
import sys

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


def die_with_parent() -> None:
    """SIGKILL this process when the thread that started it exits (Linux only: elsewhere the
    process group suffices). Async-signal-safe: usable as a `preexec_fn`."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def adopt_orphans() -> None:
    """Make this process the reaper of its descendants' orphans (Linux only; process-wide).

    When a child's process group is stopped, a process whose parent dies first (vLLM's engine
    core, its worker) is reparented: to init otherwise, which reaps it, its CPU-seconds lost to
    this process's `wait4` (docs/benchmarks.md, "Engines"). Reparented here, it is reaped by
    engines.process.Child.stop, and its CPU counts among this process's children's."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1)


PARENT_PID_ENV = "PRIME_PARENT_PID"
"""The process that started this one, as it named itself (child_site/sitecustomize.py)."""


def die_with_starter() -> None:
    """`die_with_parent` set at a Python process's start-up, where it is late: the parent may
    have died in between (then this process was re-parented and exits now, code 1). It then
    names itself in the environment, for the check of the processes it starts in turn."""
    import os

    die_with_parent()
    expected = os.environ.get(PARENT_PID_ENV, "")
    if expected.isdigit() and int(expected) != os.getppid():
        os._exit(1)
    os.environ[PARENT_PID_ENV] = str(os.getpid())
