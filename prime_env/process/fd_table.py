"""Room in the process's file-descriptor table for a run's connections, made before they open.

Why: Linux grows a process's descriptor table by doubling (256, 512, 1024, ...) when a new
descriptor does not fit, and once the process has a second thread (the `openai` SDK starts one
during the first request) each growth waits for an RCU grace period (`synchronize_rcu` in the
kernel's `expand_fdtable`), with the thread that opened the socket, here the event loop,
blocked. Measured on `prime eval run -c 512` against a 200 ms server (thread CPU time against
wall time between successive connections of the first wave): the loop stood still for 7-23 ms
at the 243rd and at the 499th connection, so the first wave took 45-58 ms to send where its CPU
work took 24-30 ms. Growing the table at the start of the run, while the process is still
single-threaded, costs one system call and no wait; the table never shrinks.
"""

from __future__ import annotations

import contextlib
import os
import sys

HEADROOM = 64
"""Descriptors a run holds besides its connections: stdio, the results file, pipes, logs."""


def reserve_fds(connections: int) -> None:
    """Grow this process's descriptor table to hold `connections` more sockets, so opening them
    never waits for the table to grow; raise the soft RLIMIT_NOFILE for them first, as far as
    the hard limit allows. Under a soft limit of 1,024 (many systems' default) a `-c 2000` run's
    connections past it failed with EMFILE and were retried with backoff: 600 rollouts at
    `-c 300` against a 200 ms server under `ulimit -S -n 200` ran at 241-257/s, and at
    863-1271/s with the limit raised (ideal 1,500; the suite running alongside)."""
    if sys.platform == "win32":
        return
    import fcntl
    import resource

    highest = connections + HEADROOM
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft <= highest:
        raised = highest + 1 if hard == resource.RLIM_INFINITY else min(hard, highest + 1)
        with contextlib.suppress(ValueError, OSError):  # a platform cap below the hard limit
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
            soft = raised
        highest = min(highest, soft - 1)
    probe = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    try:
        # F_DUPFD takes the lowest free descriptor >= `highest`: the table grows to hold it,
        # and no descriptor in use is touched (dup2 onto a busy number would close it).
        # EMFILE: the limit is already in use; connections will meet the same limit anyway.
        with contextlib.suppress(OSError):
            os.close(fcntl.fcntl(probe, fcntl.F_DUPFD_CLOEXEC, highest))
    finally:
        os.close(probe)
