"""Room in the process's file-descriptor table for a run's connections, made before they open.

Linux grows the table by doubling when a descriptor does not fit, and once the process has a
second thread (the `openai` SDK starts one) each growth waits for an RCU grace period with the
opening thread, here the event loop, blocked. Grown at the start of the run, while the process
is still single-threaded, it costs one system call and no wait (the stalls it removed:
docs/benchmarks.md, "Eval runner: where the time goes at 200 ms").
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
    the hard limit allows (past a soft limit, 1,024 on many systems, connections fail with
    EMFILE and are retried with backoff)."""
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
