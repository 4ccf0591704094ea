"""The rollout record, schema `prime.rollout/1`: defined once in `registry_index.record`, below
the SDK and the hub, so what `prime eval run` writes and what the hub accepts are one schema."""

from __future__ import annotations

from registry_index.record import (
    SCHEMA,
    ErrorInfo,
    Message,
    RolloutRecord,
    SavedState,
    ScoredRollout,
    Timing,
    TokenUsage,
    Trace,
    TraceCall,
    Turn,
    UserUsage,
)

__all__ = [
    "SCHEMA",
    "ErrorInfo",
    "Message",
    "RolloutRecord",
    "SavedState",
    "ScoredRollout",
    "Timing",
    "TokenUsage",
    "Trace",
    "TraceCall",
    "Turn",
    "UserUsage",
]
