"""Lending a core one process leaves idle to the other, only on a machine that is not busy.

While the sampler waits for a policy the trainer may run on its core too, and the sampler on
the trainer's while it waits for a batch. On cores already shared with other work the lent
OpenMP threads spin on each other (docs/benchmarks.md, "Issue 23"), so a core is lent only
while the 1-minute load average is below the machine's cores + 1 (the run itself counts ~2).
"""

from __future__ import annotations

import os


def idle_threads(lent: int, own: int) -> int:
    """`lent` threads while the machine has room for them, else the process's `own` count."""
    if lent <= own:
        return own
    cores = len(os.sched_getaffinity(0))
    return lent if os.getloadavg()[0] < cores + 1 else own
