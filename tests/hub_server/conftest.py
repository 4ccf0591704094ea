"""Fixtures: the hub in-process (route logic) or as a real server (sockets, crashes, installers).

`inproc_hub`/`fresh_inproc_hub` are in-process (`inproc.InProcessHub`: `create_app(settings)`
behind a TestClient), for route logic: no socket, no subprocess, well under a second to start.
`hub`/`fresh_hub` run `prime hub serve` on loopback, for tests whose point is a real socket:
pip, uv and twine, a SIGKILL mid-upload, several workers, a browser.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hub_server.hubproc import HubProcess, start_hub
from tests.hub_server.inproc import InProcessHub, start_inproc_hub


@pytest.fixture
def fresh_inproc_hub(tmp_path: Path) -> Iterator[InProcessHub]:
    """An in-process hub of its own (counting and rate-limit tests)."""
    with start_inproc_hub(tmp_path / "hub") as running:
        yield running


@pytest.fixture
def fresh_hub(tmp_path: Path) -> Iterator[HubProcess]:
    """A real server of its own (crash and counting tests)."""
    with start_hub(tmp_path / "hub") as running:
        yield running
