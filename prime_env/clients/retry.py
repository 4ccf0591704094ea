"""Failure semantics shared by every remote model client.

One place decides what is transient (transport errors, timeouts, 429, 5xx, malformed bodies),
how long to wait (exponential backoff with full jitter, never less than the server's
Retry-After), and when to give up (a bound on attempts AND on total time). The SDKs' own retries
are switched off so these are the only ones: stacked retry layers multiply attempts and hide
rate limits from the concurrency limiter.

The limiter is AIMD, as in TCP congestion control: it halves the number of requests allowed in
flight to an endpoint on a 429 (at most once per window: only requests started after the last
cut can cut again) and grows it by about one per window of successes. The runner's own
concurrency bound stays the upper limit; the limiter only ever lowers it.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TypeVar

from prime_env.errors import ModelError

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """Bounds for one chat call: attempts include the first try; times are seconds."""

    max_attempts: int = 6
    max_elapsed_s: float = 300.0
    base_delay_s: float = 0.25
    max_delay_s: float = 20.0
    timeout_s: float = 120.0

    def backoff(self, attempt: int, retry_after_s: float | None) -> float:
        """Delay before attempt `attempt + 1`: full jitter, floored by Retry-After."""
        ceiling = min(self.max_delay_s, self.base_delay_s * 2 ** (attempt - 1))
        delay = random.uniform(0, ceiling)
        if retry_after_s is not None:  # the server knows best; max_elapsed_s still bounds it
            delay = max(delay, retry_after_s)
        return delay


@dataclass(frozen=True)
class Failure:
    """A classified exception: what to record and whether another attempt may help."""

    error_type: str
    message: str
    retryable: bool
    retry_after_s: float | None = None
    rate_limited: bool = False


class MalformedResponse(Exception):
    """The server answered 2xx with a body that is not a usable completion."""


class AdaptiveLimiter:
    """Additive-increase / multiplicative-decrease bound on requests in flight to one endpoint."""

    def __init__(self, max_limit: int = 4096, min_limit: int = 1) -> None:
        self.max_limit = max_limit
        self.min_limit = min_limit
        self.limit = float(max_limit)
        self.in_flight = 0
        self.rate_limited = 0
        self._last_cut = 0.0
        self._waiting = 0  # callers queued for a slot: a free slot goes to them first
        self._loop: asyncio.AbstractEventLoop | None = None
        self._condition = asyncio.Condition()

    @property
    def _changed(self) -> asyncio.Condition:
        # A limiter outlives event loops (tests, repeated asyncio.run); its waiters do not.
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop, self._condition = loop, asyncio.Condition()
        return self._condition

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[float]:
        """Hold one in-flight slot; yields the start time to pass to `on_rate_limited`.

        Below the limit with nobody queued, a slot is taken without the condition's lock (no
        await between the check and the count, so no other task can interleave): that is the
        common case, once per model call, and the lock round trips were a measurable share of
        a call's CPU. Otherwise the caller queues on the condition, in arrival order."""
        if self._waiting or self.in_flight >= int(self.limit):
            changed = self._changed
            self._waiting += 1
            try:
                async with changed:
                    await changed.wait_for(lambda: self.in_flight < int(self.limit))
                    self.in_flight += 1
            finally:
                self._waiting -= 1
        else:
            self.in_flight += 1
        try:
            yield time.monotonic()
        finally:
            self.in_flight -= 1
            if self._waiting:
                async with self._changed:
                    self._changed.notify()

    def on_success(self) -> None:
        if self.limit < self.max_limit:
            self.limit = min(self.max_limit, self.limit + 1.0 / max(self.limit, 1.0))

    def on_rate_limited(self, started: float) -> None:
        self.rate_limited += 1
        if started >= self._last_cut:  # one cut per window of requests
            self.limit = max(float(self.min_limit), self.limit / 2)
            self._last_cut = time.monotonic()


_limiters: dict[str, AdaptiveLimiter] = {}


def limiter_for(endpoint: str) -> AdaptiveLimiter:
    """The process-wide limiter of an endpoint (its base URL), shared by all clients of it."""
    if endpoint not in _limiters:
        _limiters[endpoint] = AdaptiveLimiter()
    return _limiters[endpoint]


async def call_with_retries(
    attempt: Callable[[], Awaitable[T]],
    classify: Callable[[BaseException], Failure],
    policy: RetryPolicy,
    limiter: AdaptiveLimiter,
    redact: Callable[[str], str] = lambda text: text,
) -> T:
    """Run `attempt` until it succeeds, a failure is permanent, or the bounds are spent."""
    first = time.monotonic()
    for number in range(1, policy.max_attempts + 1):
        remaining = policy.max_elapsed_s - (time.monotonic() - first)
        async with limiter.slot() as started:
            try:
                async with asyncio.timeout(min(policy.timeout_s, remaining)):  # no extra task
                    result = await attempt()
            except (TimeoutError, Exception) as exc:  # noqa: BLE001 - classified below
                failure = classify(exc)
                if failure.rate_limited:
                    limiter.on_rate_limited(started)
            else:
                limiter.on_success()
                return result
        message = redact(failure.message)
        if not failure.retryable:
            raise ModelError(failure.error_type, message)
        delay = policy.backoff(number, failure.retry_after_s)
        if number == policy.max_attempts or time.monotonic() - first + delay > policy.max_elapsed_s:
            raise ModelError(
                failure.error_type,
                f"{message} (gave up after {number} attempts, {time.monotonic() - first:.1f}s)",
            )
        await asyncio.sleep(delay)
    raise AssertionError("unreachable: the loop returns or raises")


def classify_common(exc: BaseException) -> Failure | None:
    """Failures that look the same whatever the SDK: our own timeout and malformed bodies."""
    if isinstance(exc, asyncio.TimeoutError | TimeoutError):
        return Failure("timeout", "the request timed out", retryable=True)
    if isinstance(exc, MalformedResponse | json.JSONDecodeError):
        return Failure("malformed_response", f"unusable response body: {exc}", retryable=True)
    return None


def retry_after_seconds(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from a Retry-After header, in either form RFC 9110 allows.

    `Retry-After: 120` (delay-seconds) or `Retry-After: Fri, 31 Dec 1999 23:59:59 GMT`
    (an HTTP date, counted from `now`); a date in the past means 0, garbage means absent.
    """
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # RFC 9110 dates are GMT; a zone-less date is read the same way
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def status_failure(status: int, message: str, retry_after: str | None) -> Failure:
    """Classify an HTTP error status the same way for every provider."""
    if status == 429:
        return Failure("rate_limited", message, True, retry_after_seconds(retry_after), True)
    if status in (408, 409) or status >= 500:
        return Failure(
            "server_error", f"HTTP {status}: {message}", True, retry_after_seconds(retry_after)
        )
    if status in (401, 403):
        return Failure("authentication_error", f"HTTP {status}: {message}", False)
    return Failure("client_error", f"HTTP {status}: {message}", False)


def redact(text: str, secret: str | None) -> str:
    """Remove an API key from text that may be recorded (error messages end up in results)."""
    if secret and len(secret) >= 6:
        return text.replace(secret, "***")
    return text
