"""The fake provider process: ready on a signal, and never outliving a failed start."""

from __future__ import annotations

import os

import httpx
import pytest

from testing.server import FakeServer


def test_start_waits_for_the_readiness_line_and_stop_reaps() -> None:
    with FakeServer("openai") as server:
        assert server.port > 0
        assert httpx.get(f"http://127.0.0.1:{server.port}/_fake/stats").status_code == 200
        pid = server.pid
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_failed_start_leaves_no_child() -> None:
    server = FakeServer("openai")
    server._args += ["--latency-ms", "not-a-number"]  # the child exits before it is ready
    with pytest.raises(RuntimeError, match="before it was ready"):
        server.start()
    assert server._proc is not None and server._proc.poll() is not None


def test_a_hanging_start_is_killed_at_the_deadline() -> None:
    server = FakeServer("openai")
    with pytest.raises(RuntimeError, match="no readiness signal"):
        server.start(timeout=0.001)
    assert server._proc is not None and server._proc.poll() is not None
