"""Extra writable directories (`writable_dirs`): places beyond /work and /tmp where programs
may write (a Harbor task's /logs/verifier, its WORKDIR), size-limited and emptied by `reset`,
and on Docker filled with what the image holds there."""

from __future__ import annotations

import contextlib
import io
import tarfile
from collections.abc import Iterator

import pytest

from sandbox import SandboxLimits, open_sandbox
from sandbox.errors import SandboxUnavailable
from sandbox.limits import DEFAULT_IMAGE

WRITE = (
    "mkdir -p /logs/verifier && echo 0.5 > /logs/verifier/reward.txt && "
    "cat /logs/verifier/reward.txt && touch /usr/x 2>/dev/null || echo read-only"
)


def test_programs_write_there_and_reset_empties_it(backend: str) -> None:
    with open_sandbox(backend, writable_dirs=["/logs"]) as box:
        result = box.exec(WRITE, timeout=20)
        assert result.exit_code == 0, result.stderr
        assert result.stdout.decode().split() == ["0.5", "read-only"]
        assert box.read_file("/logs/verifier/reward.txt") == b"0.5\n"
        box.reset()
        assert box.exec("ls -A /logs").stdout == b""


def test_a_writable_directory_is_size_limited(backend: str) -> None:
    limits = SandboxLimits(memory_mb=256, workdir_mb=8)
    with open_sandbox(backend, limits=limits, writable_dirs=["/logs"]) as box:
        result = box.exec("head -c 20000000 /dev/zero > /logs/big", timeout=20)
        assert result.exit_code != 0 and b"No space left" in result.stderr


def test_bad_writable_dirs_are_refused() -> None:
    for path in ("logs", "/", "/work", "/tmp/x", "/usr/local", "/proc", "/etc", "/a:b"):
        with pytest.raises(ValueError, match="must be an absolute path outside"):
            open_sandbox("local", writable_dirs=[path])
    with pytest.raises(ValueError, match="repeats or nests"):
        open_sandbox("local", writable_dirs=["/logs", "/logs/verifier"])
    with pytest.raises(SandboxUnavailable, match="mount writable ones"):
        open_sandbox("unisolated", writable_dirs=["/logs"])


@pytest.fixture
def image_with_files(docker_ready: None) -> Iterator[str]:
    """An image built here from the sandbox image, with files under /app (never pulled)."""
    import docker.errors

    from sandbox.backends.docker import docker_client

    tag = "prime-sandbox/writable-test:latest"
    dockerfile = (
        f"FROM {DEFAULT_IMAGE}\nCOPY data.txt /app/data.txt\n"
        "COPY run.sh /app/bin/run.sh\nWORKDIR /app\n"
    )
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        for name, text, mode in (
            ("Dockerfile", dockerfile, 0o644),
            ("data.txt", "from the image\n", 0o644),
            ("run.sh", "#!/bin/sh\necho ran\n", 0o755),
        ):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(text), mode
            tar.addfile(info, io.BytesIO(text.encode()))
    context.seek(0)
    client = docker_client()
    client.images.build(
        fileobj=context, custom_context=True, tag=tag, pull=False, network_mode="none", rm=True
    )
    try:
        yield tag
    finally:
        with contextlib.suppress(docker.errors.DockerException):
            client.images.remove(tag, force=True)


@pytest.mark.xdist_group("docker")
def test_docker_fills_it_with_the_images_files(image_with_files: str) -> None:
    with open_sandbox("docker", image=image_with_files, writable_dirs=["/app"]) as box:
        shown = box.exec("cat data.txt && ./bin/run.sh && echo more >> data.txt", cwd="/app")
        assert shown.exit_code == 0, shown.stderr
        assert shown.stdout == b"from the image\nran\n"
        assert box.read_file("/app/data.txt") == b"from the image\nmore\n"
        box.reset()  # back to the image's files, as a fresh sandbox
        assert box.read_file("/app/data.txt") == b"from the image\n"
