"""100 hostile runs in a row, through the pool, leave the host as it was."""

from __future__ import annotations

import asyncio
import os
import threading

import pytest

from sandbox import SandboxLimits, SandboxPool
from tests.sandbox.conftest import host_footprint

pytestmark = pytest.mark.xdist_group("docker")  # starts Docker sandboxes (tests/conftest.py)

HOSTILE = [
    ("fork bomb", "bomb() { bomb | bomb & }; bomb; sleep 5", 1.0),
    ("memory hog", "python3 -c \"x=[]\nwhile True: x.append(b'x' * (16 << 20))\"", 20.0),
    ("infinite loop", "while :; do :; done", 0.5),
    ("huge output", "head -c 5000000 /dev/zero", 10.0),
    ("write outside", "echo x > /usr/pwned; echo x > /etc/pwned", 5.0),
    ("host secret", "cat /etc/shadow /root/.ssh/id_rsa", 5.0),
    (
        "network",
        "python3 -c \"import socket; socket.create_connection(('127.0.0.1', 22), 1)\"",
        5.0,
    ),
    ("sleep past timeout", "sleep 30 & sleep 30", 0.5),
    ("escape the group", "setsid sleep 300 </dev/null >/dev/null 2>&1 & sleep 0.2", 5.0),
]


def _host_state() -> dict[str, int]:
    state = host_footprint()
    state["open_fds"] = len(os.listdir("/proc/self/fd"))
    state["threads"] = threading.active_count()
    return state


async def test_hundred_hostile_runs_leave_the_host_as_it_was(backend: str) -> None:
    limits = SandboxLimits(memory_mb=192, pids=64, output_bytes=32 << 10)
    # Warm the docker client's connection pool first: it grows to its fixed size once.
    async with SandboxPool(4, backend=backend, limits=limits) as pool, pool.acquire() as box:
        await box.exec("true")
    await asyncio.sleep(0.2)
    before = _host_state()
    outcomes: list[tuple[str, bool, int]] = []
    async with SandboxPool(4, backend=backend, limits=limits) as pool:

        async def run(index: int) -> None:
            name, command, timeout = HOSTILE[index % len(HOSTILE)]
            async with pool.acquire() as box:
                result = await box.exec(command, timeout=timeout)
                outcomes.append((name, result.timed_out, result.exit_code))

        await asyncio.gather(*(run(i) for i in range(100)))
        async with pool.acquire() as box:  # the pool still hands out working sandboxes
            assert (await box.exec("echo ok")).stdout == b"ok\n"
    await asyncio.sleep(0.2)
    after = _host_state()
    assert len(outcomes) == 100
    by_name = {name: (timed_out, code) for name, timed_out, code in outcomes}
    assert by_name["infinite loop"] == (True, 137)
    assert by_name["sleep past timeout"] == (True, 137)
    assert by_name["write outside"][1] != 0 and by_name["host secret"][1] != 0
    assert by_name["network"][1] != 0 and by_name["memory hog"][1] != 0
    # fds may differ by the few pooled daemon connections and threads by the sandbox executor's
    # idle workers (bounded by the concurrency, 4 here); a per-run leak would add >= 100.
    assert abs(after.pop("open_fds") - before.pop("open_fds")) < 12
    assert abs(after.pop("threads") - before.pop("threads")) < 12
    assert after == before
