"""Fixtures: a hub server on loopback (SQLite + local blobs) and helpers around it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hub_server.hubproc import HubProcess, start_hub


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HubProcess]:
    """One hub per test module; tests use distinct user/project names."""
    with start_hub(tmp_path_factory.mktemp("hub")) as running:
        yield running


@pytest.fixture
def fresh_hub(tmp_path: Path) -> Iterator[HubProcess]:
    """A hub of its own (for crash and counting tests)."""
    with start_hub(tmp_path / "hub") as running:
        yield running
