"""Backoff and the AIMD limiter, without a network."""

from __future__ import annotations

import asyncio
import time

import pytest

from prime_env.clients.retry import (
    AdaptiveLimiter,
    Failure,
    RetryPolicy,
    call_with_retries,
    redact,
    status_failure,
)
from prime_env.errors import ModelError


def test_backoff_is_jittered_bounded_and_floored_by_retry_after() -> None:
    policy = RetryPolicy(base_delay_s=0.5, max_delay_s=4.0)
    delays = [policy.backoff(attempt, None) for attempt in range(1, 10) for _ in range(20)]
    assert all(0 <= d <= 4.0 for d in delays) and len(set(delays)) > 10
    assert all(policy.backoff(1, 7.0) >= 7.0 for _ in range(20))


def test_status_classes() -> None:
    assert status_failure(429, "x", "2").retry_after_s == 2.0
    assert status_failure(429, "x", None).rate_limited
    assert status_failure(502, "x", None).retryable
    assert not status_failure(400, "x", None).retryable
    assert status_failure(401, "x", None).error_type == "authentication_error"


async def test_limiter_halves_once_per_window_and_grows_back() -> None:
    limiter = AdaptiveLimiter(max_limit=64)
    async with limiter.slot() as started_a, limiter.slot() as started_b:
        limiter.on_rate_limited(started_a)
        limiter.on_rate_limited(started_b)  # same window: no second cut
    assert limiter.limit == 32
    async with limiter.slot() as started:
        limiter.on_rate_limited(started)  # a request started after the cut: cuts again
    assert limiter.limit == 16
    for _ in range(16 * 8):
        limiter.on_success()
    assert 16 < limiter.limit <= 64


async def test_limiter_bounds_in_flight() -> None:
    limiter = AdaptiveLimiter(max_limit=4)
    peak = 0

    async def job() -> None:
        nonlocal peak
        async with limiter.slot():
            peak = max(peak, limiter.in_flight)
            await asyncio.sleep(0.01)

    await asyncio.gather(*(job() for _ in range(40)))
    assert peak == 4


async def test_limiter_queues_past_the_limit_and_honours_a_cut_in_flight() -> None:
    """Callers past the limit wait (the lock-free path is only taken below it with nobody
    queued); after a halving while slots are held, no more than the new limit run at once."""
    limiter = AdaptiveLimiter(max_limit=2)
    order: list[str] = []
    running: list[int] = []
    release = asyncio.Event()

    async def job(name: str) -> None:
        async with limiter.slot():
            order.append(name)
            running.append(limiter.in_flight)
            await release.wait()
            await asyncio.sleep(0)

    first = [asyncio.create_task(job(n)) for n in ("a", "b", "c", "d")]
    await asyncio.sleep(0.01)
    assert order == ["a", "b"] and limiter.in_flight == 2 and limiter._waiting == 2
    limiter.on_rate_limited(time.monotonic())  # limit 2 -> 1 while two are in flight
    release.set()
    late = asyncio.create_task(job("e"))  # arrives while c and d still wait
    await asyncio.gather(*first, late)
    assert sorted(order) == ["a", "b", "c", "d", "e"] and running[2:] == [1, 1, 1]
    assert limiter.in_flight == 0 and limiter._waiting == 0


async def test_gives_up_within_total_time() -> None:
    calls = 0

    async def attempt() -> str:
        nonlocal calls
        calls += 1
        raise ConnectionError("down")

    policy = RetryPolicy(max_attempts=100, base_delay_s=0.05, max_delay_s=0.1, max_elapsed_s=0.5)
    start = time.monotonic()
    with pytest.raises(ModelError) as info:
        await call_with_retries(
            attempt, lambda e: Failure("connection_error", str(e), True), policy, AdaptiveLimiter()
        )
    assert time.monotonic() - start < 0.8
    assert 1 < calls < 100 and info.value.error_type == "connection_error"


def test_redact() -> None:
    assert redact("bad key sk-abcdef123", "sk-abcdef123") == "bad key ***"
