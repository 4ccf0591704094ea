"""Reserving descriptor-table room for a run's connections (prime_env.fd_table)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from prime_env.fd_table import HEADROOM, reserve_fds

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/status").exists(), reason="reads the table's size from Linux's /proc"
)
ROOT = Path(__file__).resolve().parents[2]


def _in_fresh_process(code: str) -> str:
    """Run `code` in a new interpreter: a table, once grown, never shrinks in this one."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


FD_SIZE = """
def fd_size():
    for line in open("/proc/self/status"):
        if line.startswith("FDSize:"):
            return int(line.split()[1])
"""


def test_the_table_holds_the_connections_before_they_open() -> None:
    out = _in_fresh_process(
        FD_SIZE
        + """
import os
from prime_env.fd_table import reserve_fds
before = fd_size()
reserve_fds(900)
opened = [os.open(os.devnull, os.O_RDONLY) for _ in range(900)]
print(before, fd_size(), len(os.listdir("/proc/self/fd")))
"""
    )
    before, after, open_now = map(int, out.split())
    assert before < 900 + HEADROOM <= after
    assert open_now >= 900  # the probe descriptors were closed, the real ones all opened


def test_descriptors_in_use_are_left_alone() -> None:
    """The reservation takes the lowest free number at or above its target: a descriptor
    already open there (dup2 would close it) keeps working."""
    read_fd, write_fd = os.pipe()
    try:
        busy = os.dup2(write_fd, 700 + HEADROOM)
        reserve_fds(700)
        os.write(busy, b"still open")
        assert os.read(read_fd, 64) == b"still open"
        os.close(busy)
    finally:
        os.close(read_fd)
        os.close(write_fd)


def test_a_low_open_files_limit_caps_the_reservation_without_an_error() -> None:
    out = _in_fresh_process(
        FD_SIZE
        + """
import resource
from prime_env.fd_table import reserve_fds
resource.setrlimit(resource.RLIMIT_NOFILE, (300, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
before = fd_size()
reserve_fds(5000)
print(before, fd_size())
"""
    )
    before, after = map(int, out.split())
    assert before < 300 <= after <= 512  # grown as far as 300 descriptors allow, no further


def test_a_run_reserves_room_for_its_concurrency() -> None:
    out = _in_fresh_process(
        FD_SIZE
        + """
import asyncio
from prime_env import Environment, Rubric, SingleTurn
from prime_env.runner import run_rollouts
from tests.prime_env.scripted import ScriptedClient

async def right(completion, answer):
    return 1.0
env = Environment([{"question": "q", "answer": "a"}], SingleTurn(), Rubric([right]))
before = fd_size()
asyncio.run(run_rollouts(env, ScriptedClient(["a"]), concurrency=900))
print(before, fd_size())
"""
    )
    before, after = map(int, out.split())
    assert before < 900 + HEADROOM <= after
