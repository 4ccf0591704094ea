"""Summaries of rollout records: what the eval table, metadata.json and the hub show.

Defined once in `registry_index.summary`, below the SDK and the hub, so `prime eval run` and the
hub's leaderboard show the same mean and error bar for one run (see that module for the maths).
"""

from __future__ import annotations

from registry_index.summary import Summary, SummaryBuilder, pass_at_k, summarize

__all__ = ["Summary", "SummaryBuilder", "pass_at_k", "summarize"]
