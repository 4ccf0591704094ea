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

The young threshold also grows with the run's concurrency: each rollout in flight keeps ~50
container objects alive (its task, coroutine frames, state, request), so at `-c 512` the
working set alone (~27k) passed a fixed 20,000 and set off young collections that walked
it and freed nothing, one of them 4-6.5 ms long inside the first burst of replies (measured
with `gc.callbacks` on `prime eval run` against a 200 ms server; docs/benchmarks.md).
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
