"""What every backend's class methods see: a started sandbox is listed as its owner's until it
stops, and removing one that is already gone does nothing."""

from __future__ import annotations

import os

import pytest

from sandbox import SandboxLimits, open_sandbox
from sandbox.backends.base import Sandbox
from sandbox.backends.docker import DockerSandbox
from sandbox.backends.local import LocalSandbox

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.xdist_group("docker")]

KINDS: dict[str, type[Sandbox]] = {"docker": DockerSandbox, "local": LocalSandbox}


def test_a_started_sandbox_is_listed_until_it_stops(backend: str, limits: SandboxLimits) -> None:
    kind = KINDS[backend]
    with open_sandbox(backend, limits=limits) as box:
        rows = [row for row in kind.list_sandboxes() if row["id"] == box.id]
        assert len(rows) == 1, kind.list_sandboxes()
        assert rows[0]["backend"] == backend and rows[0]["owner_pid"] == str(os.getpid())
        assert rows[0]["status"] == "running"
    assert box.id not in {row["id"] for row in kind.list_sandboxes()}
    kind.cleanup(box.id)  # already gone: nothing to remove, nothing raised
