"""The warm pool: fast hand-out, clean state per rollout, replacement of broken sandboxes."""

from __future__ import annotations

import asyncio

import pytest

from sandbox import SandboxError, SandboxLimits, SandboxPool
from tests.sandbox.conftest import kill_from_outside

# no_leaks; Docker sandboxes: one worker for them all (tests/conftest.py)
pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.xdist_group("docker")]


async def test_reused_sandbox_is_clean_for_the_next_rollout(backend: str) -> None:
    async with SandboxPool(1, backend=backend) as pool:
        async with pool.acquire() as box:
            first_id = box.id
            await box.write_file("answer.txt", "42")
            await box.exec(
                "setsid sleep 300 </dev/null >/dev/null 2>&1 & sleep 0.3; echo x > /tmp/t"
            )
        async with pool.acquire() as box:
            assert box.id == first_id  # reused, not restarted
            listing = await box.exec("ls -A . /tmp; cat /proc/[0-9]*/comm")
            assert b"answer.txt" not in listing.stdout and b"\nt\n" not in listing.stdout
            assert b"sleep" not in listing.stdout


async def test_warm_acquire_is_a_queue_pop(backend: str) -> None:
    async with SandboxPool(2, backend=backend) as pool:
        assert pool.idle == 2
        warm = set(pool._all)
        async with pool.acquire() as box:
            # A hand-out starts nothing (a cold start takes 50-2000 ms): the box is one of the
            # pre-started ones and no other sandbox came into being. Checked by identity, not
            # by a stopwatch, so a busy machine cannot fail it.
            assert box in warm and pool._all == warm
            assert pool.idle == 1


async def test_max_uses_one_gives_every_rollout_a_fresh_sandbox(backend: str) -> None:
    async with SandboxPool(1, backend=backend, max_uses=1) as pool:
        seen = set()
        for _ in range(3):
            async with pool.acquire() as box:
                seen.add(box.id)
        assert len(seen) == 3


async def test_a_sandbox_that_dies_in_use_is_replaced(backend: str) -> None:
    async with SandboxPool(1, backend=backend) as pool:
        async with pool.acquire() as box:
            dead_id = box.id
            kill_from_outside(box.sync)
            with pytest.raises(SandboxError):
                await box.exec("true")
        async with pool.acquire() as box:
            assert box.id != dead_id
            assert (await box.exec("echo ok")).stdout == b"ok\n"


async def test_concurrent_rollouts_share_the_pool(backend: str) -> None:
    async with SandboxPool(3, backend=backend) as pool:

        async def rollout(i: int) -> bytes:
            async with pool.acquire() as box:
                await box.write_file("in.txt", str(i))
                return (await box.exec("cat in.txt")).stdout

        results = await asyncio.gather(*(rollout(i) for i in range(12)))
        assert results == [str(i).encode() for i in range(12)]


async def test_pool_that_cannot_start_raises_sandbox_error(docker_ready: None) -> None:
    with pytest.raises(SandboxError, match="not in the Docker daemon"):
        async with SandboxPool(2, backend="docker", image="prime-sandbox/missing:0"):
            pass


def test_bad_pool_arguments_are_rejected() -> None:
    with pytest.raises(ValueError, match="size"):
        SandboxPool(0)
    with pytest.raises(ValueError, match="max_uses"):
        SandboxPool(1, max_uses=0)
    with pytest.raises(ValueError, match="unknown sandbox backend"):
        asyncio.run(SandboxPool(1, backend="podman").start())


async def test_pool_limits_apply(backend: str) -> None:
    limits = SandboxLimits(output_bytes=10)
    async with SandboxPool(1, backend=backend, limits=limits) as pool, pool.acquire() as box:
        result = await box.exec("echo 0123456789abcdef")
        assert result.stdout == b"0123456789" and result.stdout_truncated
