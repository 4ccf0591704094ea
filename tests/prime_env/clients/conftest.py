"""Fake provider servers shared by the client tests (one process each per module)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from testing.server import FakeServer

API_KEY = "sk-test-0123456789abcdef"


@pytest.fixture(scope="module")
def openai_server() -> Iterator[FakeServer]:
    with FakeServer("openai", api_key=API_KEY) as server:
        yield server


@pytest.fixture(scope="module")
def anthropic_server() -> Iterator[FakeServer]:
    with FakeServer("anthropic", api_key=API_KEY) as server:
        yield server
