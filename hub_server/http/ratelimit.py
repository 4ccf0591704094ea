"""In-memory sliding-window rate limits (uploads per token/IP, failed logins per IP).

State lives in the server process: one uvicorn worker enforces the limit exactly; N workers
behind a load balancer enforce up to N times the limit (documented in docs/hub.md).
"""

from __future__ import annotations

import threading
import time
from collections import deque


class SlidingWindowLimiter:
    """At most `limit` events per `window` seconds for each key."""

    def __init__(self, limit: int, window: float = 60.0) -> None:
        self.limit = limit
        self.window = window
        self._events: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def _prune(self, key: str, now: float) -> deque[float]:
        events = self._events.setdefault(key, deque())
        while events and events[0] <= now - self.window:
            events.popleft()
        if not events:
            del self._events[key]
            events = self._events.setdefault(key, deque())
        return events

    def retry_after(self, key: str) -> int | None:
        """Seconds to wait if `key` is over its limit now, else None (records nothing)."""
        now = time.monotonic()
        with self._lock:
            events = self._prune(key, now)
            if len(events) < self.limit:
                return None
            return max(1, int(events[0] + self.window - now + 1))

    def hit(self, key: str) -> int | None:
        """Record one event; return seconds to wait when it exceeds the limit (not recorded)."""
        now = time.monotonic()
        with self._lock:
            events = self._prune(key, now)
            if len(events) >= self.limit:
                return max(1, int(events[0] + self.window - now + 1))
            events.append(now)
            return None
