"""`prime env push` and `prime env install` survive a hub restart in the middle of a transfer.

A real hub (`prime hub serve`, SQLite + local blobs) sits behind a slow loopback link so that an
8 MiB wheel takes two seconds to move. Once 3 MiB have gone through, the test cuts the
link, SIGKILLs the hub, starts it again and restores the link. The command must succeed on
its own (retrying with backoff), and the hub must hold exactly one copy of what was pushed.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e.cli_support import (
    PRIME,
    SlowLink,
    cli_env,
    fresh_venv,
    installed,
    ok,
    prime,
    write_env,
)
from tests.hub_server.hubproc import HubProcess

pytestmark = [pytest.mark.timeout(900), pytest.mark.slow]

WHEEL_DATA = 8 * 1024 * 1024  # the cut at 3 MiB leaves over a second of transfer
RATE = 4 * 1024 * 1024  # bytes per second through the link, each way


@pytest.fixture
def link(hub: HubProcess) -> Iterator[SlowLink]:
    relay = SlowLink(hub.port, RATE)
    try:
        yield relay
    finally:
        relay.close()


def _restart_midway(
    hub: HubProcess, link: SlowLink, args: list[str], env: dict[str, str],
    moved: Callable[[], int],
) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """Run `prime ARGS`; restart the hub once `moved()` passes 3 MiB; return the result."""
    proc = subprocess.Popen(
        [str(PRIME), *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 300
        while moved() < 3 * 1024 * 1024:
            assert proc.poll() is None, f"finished before the restart: {proc.communicate()}"
            assert time.monotonic() < deadline, "the transfer never started"
            time.sleep(0.02)
        link.cut()
        hub.kill()
        hub.start()
        link.restore()
        stdout, stderr = proc.communicate(timeout=400)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def test_push_and_install_survive_a_hub_restart(
    hub: HubProcess, link: SlowLink, tmp_path: Path
) -> None:
    token = hub.add_user("rita")
    env = cli_env(tmp_path / "home", link.url) | {"PRIME_API_KEY": token}
    root = write_env(tmp_path, "big-env", data_bytes=WHEEL_DATA)

    pushed = _restart_midway(
        hub, link, ["env", "push", str(root), "--output", "json"], env, lambda: link.sent_up
    )
    assert pushed.returncode == 0, pushed.stderr
    assert "retrying" in pushed.stderr  # it really was cut off midway
    assert json.loads(pushed.stdout)["version"] == "0.1.0"
    versions = json.loads(ok(prime(env, "env", "versions", "rita/big-env", "--output", "json")))
    assert [v["semantic_version"] for v in versions["versions"]] == ["0.1.0"]
    kinds = sorted(f["kind"] for f in versions["versions"][0]["files"])
    assert kinds == ["source", "wheel"]  # one of each: nothing duplicated

    python = fresh_venv(tmp_path / "venv", env)
    got = _restart_midway(
        hub, link, ["env", "install", "rita/big-env", "--python", str(python)], env,
        lambda: link.sent_down,
    )  # fmt: skip
    assert got.returncode == 0, got.stderr
    assert "retrying" in got.stderr
    assert installed(python, "big-env") == "0.1.0"
