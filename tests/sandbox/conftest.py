"""Fixtures for the sandbox tests: a real Docker daemon with the default image, and both backends.

In CI the daemon is started by scripts/start_services.sh and the image is built once per
machine (debootstrap + docker import), then found by tag on later runs.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox import Sandbox, SandboxLimits
from sandbox.limits import DEFAULT_IMAGE
from tests.support import read_proc, require


@pytest.fixture(scope="session")
def docker_ready() -> None:
    from sandbox.backends.docker import docker_available, image_exists

    require(docker_available(), "a Docker daemon")
    if not image_exists(DEFAULT_IMAGE):
        from sandbox.image import build_image

        build_image(DEFAULT_IMAGE)
    require(image_exists(DEFAULT_IMAGE), f"the sandbox image {DEFAULT_IMAGE}")


@pytest.fixture(params=["docker", "local"])
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "docker":
        request.getfixturevalue("docker_ready")
    else:
        from sandbox.backends.local import bwrap_path

        require(bwrap_path() is not None, "bubblewrap (bwrap)")
        require(os.geteuid() == 0, "root (the local backend's per-sandbox uid)")
    return str(request.param)


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A fresh directory every local uid can reach (pytest's tmp_path is under a 0700 one)."""
    folder = Path(tempfile.mkdtemp(prefix="prime-test-"))  # in /tmp: traversable by all
    try:
        folder.chmod(0o755)
        yield folder
    finally:
        shutil.rmtree(folder)


@pytest.fixture
def host_secret(open_dir: Path) -> Path:
    """A world-readable host file any local uid could read (a token file, an environment's
    reference solutions): only isolation keeps it from a sandboxed program."""
    path = open_dir / "token"
    path.write_text("hunter2-secret")
    path.chmod(0o644)
    return path


@pytest.fixture
def limits() -> SandboxLimits:
    """Small limits so hostile programs hit them quickly on a 2-core machine."""
    return SandboxLimits(memory_mb=256, pids=64, output_bytes=64 << 10, timeout_s=10.0)


def _children(pid: int) -> list[int]:
    found = []
    for child, data in read_proc("stat"):
        stat = data.rsplit(b")", 1)[1].split()
        if int(stat[1]) == pid and stat[0] != b"Z":
            found.append(child)
    return found


def host_footprint() -> dict[str, int]:
    """What a sandbox could leak: containers of this run, local sandbox claims, child processes.

    (Open fds are checked over many runs in test_soak: the docker client's connection pool
    grows to its size first, so a per-test fd count would be noise.)
    """
    from sandbox.backends import docker as docker_backend

    containers = 0
    if docker_backend.docker_available():
        client = docker_backend.docker_client()
        containers = len(
            client.containers.list(
                all=True, filters={"label": f"{docker_backend.LABEL_RUN}={docker_backend.RUN_ID}"}
            )
        )
    claims = [text for text in claim_texts() if f"{os.getpid()}:" in text]
    return {
        "containers": containers,
        "local_claims": len(claims),
        "child_processes": len(_children(os.getpid())),
    }


def claim_texts() -> list[str]:
    """The local backend's claim files, read while other processes on the host (another test
    run's reaper) may remove theirs between the listing and the read."""
    from sandbox.backends import local as local_backend

    texts = []
    for path in local_backend.state_dir().iterdir():
        try:
            texts.append(path.read_text())
        except FileNotFoundError:
            continue
    return texts


@pytest.fixture
def no_leaks() -> Iterator[None]:
    """Fails the test if it leaves a container, a local sandbox or a child process behind."""
    before = host_footprint()
    yield
    after = host_footprint()
    assert after == before, f"the host changed: before {before}, after {after}"


def kill_from_outside(box: Sandbox) -> None:
    """A crash of the sandbox itself, not caused by any program: its supervisor killed by the host."""
    sandbox: Any = box
    if box.backend == "docker":
        sandbox.container.kill()
    else:
        os.killpg(sandbox._proc.pid, signal.SIGKILL)
