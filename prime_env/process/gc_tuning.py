"""Cyclic garbage collection tuned for a run of many rollouts on one event loop.

What start-up made (the SDKs, pydantic models, the environment: a few hundred thousand objects)
is not garbage, so it is frozen out of the collector's view (`gc.freeze`); and the young
threshold grows with the run's concurrency, so young collections do not keep walking the
rollouts in flight and freeing nothing. Reference counting still frees almost everything at
once; only cyclic garbage waits longer. Forked workers inherit both settings. What the
collector cost before: docs/benchmarks.md, "Eval runner: where the time goes at 200 ms".
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG_THRESHOLD = 20_000
"""Net allocations between young collections (CPython's default is 700), at least."""

OBJECTS_PER_ROLLOUT = 100
"""Room per rollout in flight in the young threshold: twice what a single-turn rollout keeps."""


def young_threshold(concurrency: int) -> int:
    """The young threshold for a run of `concurrency` rollouts in flight."""
    return max(YOUNG_THRESHOLD, OBJECTS_PER_ROLLOUT * concurrency)


@contextmanager
def rollout_gc(concurrency: int = 0) -> Iterator[None]:
    """Freeze the objects alive now and collect less often until the block ends."""
    thresholds = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(young_threshold(concurrency), *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()
