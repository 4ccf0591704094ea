"""Nothing is left behind: not after stop, not after the owner is SIGKILLed, not past the TTL."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sandbox import SandboxError, open_sandbox
from sandbox.owner import Owner, _start_time, host_id
from tests.sandbox.conftest import claim_texts, kill_from_outside

pytestmark = pytest.mark.xdist_group("docker")  # starts Docker sandboxes (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]

CHILD = r"""
import json, sys, threading
from sandbox import open_sandbox
from sandbox.backends.local import LocalSandbox

boxes = {"docker": open_sandbox("docker").start(), "bwrap": LocalSandbox().start(),
         "plain": open_sandbox("unisolated").start()}
for box in boxes.values():
    # The owner dies in the middle of a command that also left its session.
    command = "setsid sleep 1000 </dev/null >/dev/null 2>&1 & sleep 1000"
    threading.Thread(target=box.exec, args=(command,), kwargs={"timeout": 900}, daemon=True).start()
print(json.dumps({"container": boxes["docker"].container.id,
                  "uids": [boxes["bwrap"].uid, boxes["plain"].uid],
                  "roots": [str(boxes["bwrap"].root), str(boxes["plain"].root)],
                  "cgroups": [box.cgroup.encode() for box in (boxes["bwrap"], boxes["plain"])
                              if box.cgroup]}), flush=True)
sys.stdin.read()
"""


def _names(uid: int) -> list[str]:
    from sandbox.backends.local import processes_of

    names = []
    for pid in processes_of(uid):
        try:
            names.append(Path(f"/proc/{pid}/comm").read_text().strip())
        except OSError:
            continue
    return sorted(names)


def _wait_for(predicate, seconds: float = 20.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


@pytest.mark.usefixtures("docker_ready")
def test_sigkilled_owner_leaves_nothing_after_the_next_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sandbox.backends import local as local_backend
    from sandbox.backends.docker import LABEL, docker_client

    # Claims of their own: any local sandbox started on this machine meanwhile (another test
    # process) would reap the orphans first, before this test could see them waiting.
    monkeypatch.setenv("PRIME_SANDBOX_STATE", str(tmp_path / "state"))

    child = subprocess.Popen(
        [sys.executable, "-c", CHILD],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    info = json.loads(child.stdout.readline())
    bwrap_uid, plain_uid = info["uids"]
    assert _wait_for(
        lambda: _names(plain_uid).count("sleep") == _names(bwrap_uid).count("sleep") == 2
    )
    child.send_signal(signal.SIGKILL)
    child.wait()
    # The sandboxes' processes die with their owner (parent-death signal, then the PID
    # namespace goes with its init); their directories and cgroups wait for the reaper.
    assert _wait_for(lambda: _names(plain_uid) == _names(bwrap_uid) == [])
    assert all(Path(root).exists() for root in info["roots"])
    cgroups = [Path(p) for text in info["cgroups"] for p in text.split(";")]
    assert all(path.exists() for path in cgroups)

    with open_sandbox("local") as box:  # the next start reaps the local orphans
        assert box.exec("true").ok
    with open_sandbox("docker") as box:  # ... and the Docker ones
        assert box.exec("true").ok

    assert local_backend.processes_of(plain_uid) == []
    assert local_backend.processes_of(bwrap_uid) == []
    assert not any(Path(root).exists() for root in info["roots"])
    assert not any(path.exists() for path in cgroups)
    assert not any(f"{child.pid}:" in text for text in claim_texts())
    assert _wait_for(
        lambda: (
            not docker_client().containers.list(
                all=True, filters={"label": LABEL, "id": info["container"]}
            )
        )
    )


def _dead_owner() -> Owner:
    proc = subprocess.Popen(["sleep", "0.2"])
    start = _start_time(proc.pid)
    proc.wait()
    assert start is not None
    return Owner(proc.pid, start, host_id())


@pytest.mark.usefixtures("docker_ready")
def test_reaper_removes_orphans_and_expired_but_keeps_live_containers() -> None:
    import docker.errors

    from sandbox.backends.docker import (
        DEFAULT_IMAGE,
        LABEL,
        LABEL_EXPIRES,
        LABEL_OWNER,
        DockerSandbox,
        docker_client,
    )

    client = docker_client()
    now = time.time()
    specs = {
        "orphan": (_dead_owner(), now + 3600),
        "expired": (Owner.current(), now - 1),
        "live": (Owner.current(), now + 3600),
        "other-host": (Owner(1, "0", "elsewhere/boot"), now + 3600),
    }
    ids = {}
    for name, (owner, expires) in specs.items():
        # Created, not started (the reaper removes both; `run` would pull a missing image,
        # and a start could race with another process's reaper removing an orphan already).
        container = client.containers.create(
            DEFAULT_IMAGE,
            ["sleep", "1000"],
            network_mode="none",
            labels={LABEL: "1", LABEL_OWNER: owner.encode(), LABEL_EXPIRES: str(int(expires))},
        )
        ids[name] = container.id
    try:
        # Not a count: a parallel test worker starting a sandbox reaps these orphans too, and
        # may be first. What holds is which containers are gone.
        DockerSandbox.reap_orphans()
        remaining = {c["Id"] for c in client.api.containers(all=True, filters={"label": LABEL})}
        assert ids["orphan"] not in remaining and ids["expired"] not in remaining
        assert ids["live"] in remaining and ids["other-host"] in remaining
    finally:
        for container_id in ids.values():
            with contextlib.suppress(docker.errors.NotFound):  # already reaped
                client.api.remove_container(container_id, force=True)


@pytest.mark.usefixtures("no_leaks")
def test_dead_sandbox_raises_sandbox_error_not_a_result(backend: str) -> None:
    box = open_sandbox(backend).start()
    try:
        kill_from_outside(box)
        with pytest.raises(SandboxError, match="died"):
            box.exec("echo hi")
        assert not box.alive
        with pytest.raises(SandboxError):
            box.exec("echo again")
    finally:
        box.stop()


def test_unreachable_daemon_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from sandbox import SandboxUnavailable
    from sandbox.backends import docker as docker_backend

    monkeypatch.setattr(docker_backend, "_client", None)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    with pytest.raises(SandboxUnavailable, match="cannot reach the Docker daemon"):
        open_sandbox("docker").start()
    assert docker_backend._client is None
    with pytest.raises(SandboxUnavailable, match="not in the Docker daemon"):
        monkeypatch.delenv("DOCKER_HOST")
        if not docker_backend.docker_available():
            pytest.skip("no daemon for the second half")
        open_sandbox("docker", image="prime-sandbox/does-not-exist:1").start()


def test_a_daemon_lost_after_connecting_is_unavailable_and_reconnected(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A daemon stopped mid-run (the cached client's socket is gone): `SandboxUnavailable`, a
    rollout error the trainer stops on, not a bare ConnectionError; the next sandbox
    connects afresh."""
    import docker

    from sandbox import SandboxUnavailable
    from sandbox.backends import docker as docker_backend

    lost = docker.DockerClient(base_url=f"unix://{tmp_path}/gone.sock", version="1.41")
    monkeypatch.setattr(docker_backend, "_client", lost)
    with pytest.raises(SandboxUnavailable, match="cannot reach the Docker daemon"):
        open_sandbox("docker").start()
    assert docker_backend._client is None


def test_stop_is_idempotent_and_exec_after_stop_fails(backend: str) -> None:
    box = open_sandbox(backend).start()
    box.stop()
    box.stop()
    with pytest.raises(SandboxError, match="not running"):
        box.exec("true")
