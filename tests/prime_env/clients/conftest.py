"""Fake provider servers shared by the client tests (one process each per module)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TypeVar

import pytest

from prime_env.clients.anthropic_client import AnthropicClient
from prime_env.clients.openai_client import OpenAIClient
from prime_env.clients.retry import AdaptiveLimiter, RetryPolicy
from testing.server import FakeServer

API_KEY = "sk-test-0123456789abcdef"
FAST = RetryPolicy(max_attempts=4, base_delay_s=0.01, max_delay_s=0.05, timeout_s=1.0)
Hosted = TypeVar("Hosted", OpenAIClient, AnthropicClient)


def hosted_client(
    cls: type[Hosted], model: str, server: FakeServer, stream: bool, policy: RetryPolicy
) -> Hosted:
    """A client of `server`; a private limiter per client so one test's rate limiting never
    slows another."""
    return cls(
        model,
        base_url=server.url,
        api_key=API_KEY,
        stream=stream,
        policy=policy,
        limiter=AdaptiveLimiter(),
    )


@pytest.fixture(scope="module")
def openai_server() -> Iterator[FakeServer]:
    with FakeServer("openai", api_key=API_KEY) as server:
        yield server


@pytest.fixture(scope="module")
def anthropic_server() -> Iterator[FakeServer]:
    with FakeServer("anthropic", api_key=API_KEY) as server:
        yield server
