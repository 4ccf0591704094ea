"""Why a run stops: the one exception the orchestrator raises for a run that cannot go on."""

from __future__ import annotations


class TrainingStopped(RuntimeError):
    """The run cannot continue safely (probe failed, stale policy served, sampler keeps
    failing); the message says why. Checkpoints written so far stay resumable."""
