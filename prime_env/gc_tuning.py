"""Cyclic garbage collection tuned for a run of many rollouts on one event loop.

Why: after start-up (the `openai` SDK, pydantic models, the environment) a process holds a
few hundred thousand objects, and every rollout allocates hundreds more. CPython's collector
then runs a young collection every 700 net allocations and, now and then, a full one that
walks every object in the process: measured on `prime eval run` at `-c 128` against a 200 ms
server, about 7% of the run's CPU went to collections, with single pauses of several
milliseconds during which no reply is read and no request sent (docs/benchmarks.md,
"Eval runner"). Freezing what start-up made moves it out of the collector's view (it is not
garbage; `gc.freeze` is meant for exactly this), and a larger young threshold makes the
collections that remain rarer. Reference counting still frees almost everything at once;
only cyclic garbage waits a little longer. Forked workers inherit both settings.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG_THRESHOLD = 20_000
"""Net allocations between young collections (CPython's default is 700)."""


@contextmanager
def rollout_gc() -> Iterator[None]:
    """Freeze the objects alive now and collect less often until the block ends."""
    thresholds = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()
