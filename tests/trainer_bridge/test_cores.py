"""trainer_bridge.cores: an idle core is lent only while the machine has room for it."""

from __future__ import annotations

import os

import pytest

from trainer_bridge import cores


def _machine(monkeypatch: pytest.MonkeyPatch, n_cores: int, load: float) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(n_cores)))
    monkeypatch.setattr(os, "getloadavg", lambda: (load, 0.0, 0.0))


@pytest.mark.parametrize(("load", "threads"), [(0.3, 2), (2.9, 2), (3.0, 1), (14.0, 1)])
def test_a_core_is_lent_below_the_cores_plus_one(
    monkeypatch: pytest.MonkeyPatch, load: float, threads: int
) -> None:
    _machine(monkeypatch, 2, load)
    assert cores.idle_threads(2, 1) == threads


def test_nothing_to_lend_never_reads_the_load(monkeypatch: pytest.MonkeyPatch) -> None:
    def unread() -> tuple[float, float, float]:
        raise AssertionError("the load average was read")

    monkeypatch.setattr(os, "getloadavg", unread)
    assert cores.idle_threads(1, 1) == 1
    assert cores.idle_threads(1, 3) == 3  # never fewer than the process's own threads
