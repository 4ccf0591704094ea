"""Reserving descriptor-table room for a run's connections (prime_env.process.fd_table)."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from prime_env.process.fd_table import HEADROOM, reserve_fds

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/status").exists(), reason="reads the table's size from Linux's /proc"
)
ROOT = Path(__file__).resolve().parents[3]


def _in_fresh_process(code: str) -> list[int]:
    """Run `code` in a new interpreter (a table, once grown, never shrinks in this one) with
    `fd_size()`, `before` (the table it started with: a child's is sized by the highest
    descriptor its parent had open, so it varies) and the open-files limit raised to the hard
    one; return the integers it prints."""
    prelude = """
import os, resource
def fd_size():
    for line in open("/proc/self/status"):
        if line.startswith("FDSize:"):
            return int(line.split()[1])
hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
before = fd_size()
"""
    done = subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    return [int(word) for word in done.stdout.split()]


def test_the_table_holds_the_connections_before_they_open() -> None:
    before, wanted, after, open_now = _in_fresh_process(
        """
from prime_env.process.fd_table import reserve_fds
wanted = before + 300  # more than the table holds now
reserve_fds(wanted)
print(before, wanted, fd_size())
opened = [os.open(os.devnull, os.O_RDONLY) for _ in range(wanted)]
print(len(os.listdir("/proc/self/fd")))
"""
    )
    assert before < wanted + HEADROOM <= after
    assert open_now >= wanted  # the probe descriptors were closed, the real ones all opened


def test_descriptors_in_use_are_left_alone() -> None:
    """The reservation takes the lowest free number at or above its target: a descriptor
    already open there (dup2 would close it) keeps working."""
    read_fd, write_fd = os.pipe()
    try:
        busy = fcntl.fcntl(write_fd, fcntl.F_DUPFD, 700)  # the lowest free number >= 700
        reserve_fds(busy - HEADROOM)  # aims at exactly that descriptor
        os.write(busy, b"still open")
        assert os.read(read_fd, 64) == b"still open"
        os.close(busy)
    finally:
        os.close(read_fd)
        os.close(write_fd)


def test_a_low_soft_limit_is_raised_for_the_connections() -> None:
    before, wanted, soft, after = _in_fresh_process(
        """
from prime_env.process.fd_table import reserve_fds
resource.setrlimit(resource.RLIMIT_NOFILE, (before + 100, hard))  # a default 1,024 in miniature
wanted = before + 300
reserve_fds(wanted)
print(before, wanted, resource.getrlimit(resource.RLIMIT_NOFILE)[0], fd_size())
"""
    )
    assert soft > wanted + HEADROOM and after >= wanted + HEADROOM > before


def test_a_low_hard_limit_caps_the_reservation_without_an_error() -> None:
    before, limit, soft, after = _in_fresh_process(
        """
from prime_env.process.fd_table import reserve_fds
limit = before + 100
resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
reserve_fds(10 * limit)  # far past the limit: grown as far as it allows, no error
print(before, limit, resource.getrlimit(resource.RLIMIT_NOFILE)[0], fd_size())
"""
    )
    assert soft == limit and before < limit <= after < 10 * limit


def test_a_run_reserves_room_for_its_concurrency() -> None:
    before, wanted, after = _in_fresh_process(
        """
import asyncio
from prime_env import Environment, Rubric, SingleTurn
from prime_env.runner import run_rollouts
from tests.prime_env.scripted import ScriptedClient

async def right(completion, answer):
    return 1.0
env = Environment([{"question": "q", "answer": "a"}], SingleTurn(), Rubric([right]))
wanted = before + 300
asyncio.run(run_rollouts(env, ScriptedClient(["a"]), concurrency=wanted))
print(before, wanted, fd_size())
"""
    )
    assert before < wanted + HEADROOM <= after
