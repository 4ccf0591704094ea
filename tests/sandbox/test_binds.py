"""Read-only bind mounts: a host directory visible in the sandbox, writable by nobody there, and
a Unix socket in it reachable with the network off (how an agent program's model calls leave
its sandbox)."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

import pytest

from sandbox import open_sandbox
from sandbox.errors import SandboxUnavailable

PROBE = """
import socket
s = socket.socket(socket.AF_UNIX)
s.connect('/opt/shared/api.sock')
print(s.recv(64).decode(), open('/opt/shared/note.txt').read())
try:
    open('/opt/shared/new.txt', 'w')
except OSError as exc:
    print('read-only', exc.errno)
try:
    socket.create_connection(('1.1.1.1', 80), timeout=2)
except OSError:
    print('no network')
"""


def test_a_bound_directory_and_its_socket(backend: str, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    (shared / "note.txt").write_text("from the host")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(shared / "api.sock"))
    os.chmod(shared / "api.sock", 0o777)
    server.listen(1)

    def greet() -> None:
        conn, _ = server.accept()
        conn.sendall(b"hello")
        conn.close()

    threading.Thread(target=greet, daemon=True).start()
    try:
        with open_sandbox(backend, binds={str(shared): "/opt/shared"}) as box:
            result = box.exec(["python3", "-c", PROBE], timeout=20)
    finally:
        server.close()
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.decode().splitlines()
    assert lines[0] == "hello from the host"
    assert lines[1].startswith("read-only") and lines[2] == "no network"
    assert not (shared / "new.txt").exists()


def test_bad_binds_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="is not a directory"):
        open_sandbox("local", binds={str(tmp_path / "missing"): "/opt/x"})
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    with pytest.raises(ValueError, match="not readable by the sandbox's programs"):
        open_sandbox("local", binds={str(private): "/opt/x"})
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    for target in ("relative", "/", "/work/x", "/tmp"):
        with pytest.raises(ValueError, match="must be an absolute path outside"):
            open_sandbox("local", binds={str(shared): target})
    with pytest.raises(SandboxUnavailable, match="cannot bind host directories"):
        open_sandbox("unisolated", binds={str(shared): "/opt/x"})
