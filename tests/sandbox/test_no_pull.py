"""Docker is never asked to pull an image: everything it runs is built on this machine.

Two checks: no code here (product, tests, scripts) calls a pulling API (`images.pull`,
`api.pull`, `containers.run`, which pulls a missing image, a `build` without `pull=False`) or
the docker CLI without `--pull never`; and the CLI, driven through a proxy that records every request it sends to the
real daemon, answers a missing image with the command that builds it and never sends the
daemon a pull (`POST /images/create?fromImage=`).
"""

from __future__ import annotations

import ast
import os
import re
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.limits import DEFAULT_IMAGE
from tests.support import require

pytestmark = pytest.mark.xdist_group("docker")  # starts Docker sandboxes (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
PRIME = str(ROOT / ".venv" / "bin" / "prime")
_SKIP_DIRS = {".venv", ".git", "node_modules", "build", "dist", "__pycache__"}
# `docker run ...` in a shell line or a string, `["docker", "run", ...]` in an argv list.
_CLI = r"docker(?:\s+|[\"'],\s*[\"'])({})(?=[\s\"']|$)"
_CLI_RUN = re.compile(_CLI.format("run|create"))
_CLI_PULLS = re.compile(_CLI.format("pull|build"))


def _sources(*suffixes: str) -> Iterator[Path]:
    for top, dirs, files in os.walk(ROOT):
        dirs[:] = [name for name in dirs if name not in _SKIP_DIRS and not name.startswith(".")]
        yield from (Path(top, name) for name in files if Path(name).suffix in suffixes)


def _passes_pull_false(call: ast.Call) -> bool:
    """An SDK build pulls a missing base image unless it is given `pull=False`."""
    return any(
        word.arg == "pull" and isinstance(word.value, ast.Constant) and word.value.value is False
        for word in call.keywords
    )


def _pulling_calls(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            receiver = ast.unparse(node.func.value)
            name = f"{receiver}.{node.func.attr}"
            if (
                (node.func.attr == "pull" and re.search(r"(images|api|client)$", receiver))
                or (node.func.attr == "run" and receiver.endswith("containers"))
                or (node.func.attr == "build" and re.search(r"(images|api)$", receiver)
                    and not _passes_pull_false(node))
            ):  # fmt: skip
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {name}")
    return found


def test_no_code_asks_docker_to_pull() -> None:
    this = Path(__file__).resolve()
    calls = [call for path in _sources(".py") for call in _pulling_calls(path)]
    assert calls == [], "these calls pull a missing image; create containers instead"
    commands = []
    for path in _sources(".py", ".sh"):
        if path.resolve() == this:
            continue
        for number, line in enumerate(path.read_text("utf-8").splitlines(), 1):
            if _CLI_PULLS.search(line) or (
                _CLI_RUN.search(line) and not re.search(r"--pull[ =\W]+never", line)
            ):
                commands.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert commands == [], "docker CLI calls must not pull (`docker run --pull never ...`)"


class RecordingProxy:
    """A Unix socket that forwards to the Docker daemon's and keeps every byte sent to it."""

    def __init__(self, upstream: str, path: Path) -> None:
        self.upstream = upstream
        self.sent = bytearray()
        self.lock = threading.Lock()
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(64)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            daemon = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            daemon.connect(self.upstream)
            threading.Thread(target=self._pipe, args=(client, daemon, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(daemon, client, False), daemon=True).start()

    def _pipe(self, source: socket.socket, target: socket.socket, record: bool) -> None:
        try:
            while chunk := source.recv(1 << 16):
                if record:
                    with self.lock:
                        self.sent += chunk
                target.sendall(chunk)
        except OSError:
            pass
        finally:
            try:  # pass the end on, as the attach stream's EOF is the sandbox's stop signal
                target.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def close(self) -> None:
        self.server.close()


@pytest.fixture
def proxy(docker_ready: None, tmp_path: Path) -> Iterator[RecordingProxy]:
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    require(host.startswith("unix://"), "a Docker daemon on a Unix socket")
    recorder = RecordingProxy(host.removeprefix("unix://"), tmp_path / "docker.sock")
    yield recorder
    recorder.close()


def prime(proxy: RecordingProxy, *args: str) -> subprocess.CompletedProcess[str]:
    path = proxy.server.getsockname()
    return subprocess.run(
        [PRIME, "sandbox", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "DOCKER_HOST": f"unix://{path}"},
    )


def test_a_missing_image_is_a_clear_error_and_no_pull(proxy: RecordingProxy) -> None:
    missing = "prime-sandbox/never-built:0"
    done = prime(proxy, "run", "--backend", "docker", "--image", missing, "--", "true")
    assert done.returncode == 2 and "prime sandbox build-image" in done.stderr, done
    assert "Traceback" not in done.stderr, done.stderr
    ran = prime(proxy, "run", "--backend", "docker", "--", "echo", "ran")
    assert (ran.returncode, ran.stdout) == (0, "ran\n"), ran
    built = prime(proxy, "build-image", "--tag", DEFAULT_IMAGE)
    assert built.returncode == 0 and built.stdout.strip().endswith(": present"), built
    with proxy.lock:
        sent = bytes(proxy.sent)
    assert b"/containers/create" in sent and missing.encode() in sent  # it went through here
    assert b"fromImage" not in sent and b"/images/create" not in sent
