"""Helpers for the `prime` CLI end-to-end tests: run the command, write environments, and a
slow loopback link that can be cut and restored around a real hub restart."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from prime_env.uv_binary import find_uv
from tests.support import require, suite_site_view

PRIME = Path(sys.executable).with_name("prime")


def cli_env(home: Path, hub_url: str) -> dict[str, str]:
    """An environment for `prime`: own settings and caches, no index beyond loopback."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PRIME_", "UV_", "PIP_"))}
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_CACHE_HOME=str(home / ".cache"),
        PRIME_HUB_URL=hub_url,
        UV_CACHE_DIR=str(home / "uv-cache"),
        UV_PYTHON_DOWNLOADS="never",
        UV_OFFLINE="1",  # environments without dependencies: nothing to fetch from any index
        NO_COLOR="1",
        COLUMNS="200",
    )
    return env


def prime(
    env: dict[str, str], *args: str, token: str | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    run_env = dict(env)
    if token is not None:
        run_env["PRIME_API_KEY"] = token
    return subprocess.run(
        [str(PRIME), *args], check=False, env=run_env, capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result.stdout


def one_line_error(result: subprocess.CompletedProcess[str], *needles: str) -> str:
    """A refusal: non-zero exit, one `Error: …` line on stderr, no traceback."""
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr + result.stdout
    lines = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def write_env(
    parent: Path,
    name: str,
    version: str = "0.1.0",
    *,
    factory: bool = True,
    data_bytes: int = 0,
) -> Path:
    """An environment package (setuptools, no dependencies); `factory=False` leaves out
    `load_environment`; `data_bytes` adds an incompressible data file (a big wheel)."""
    module = name.replace("-", "_")
    root = parent / name
    (root / module).mkdir(parents=True)
    (root / "pyproject.toml").write_text(
        "[build-system]\n"
        'requires = ["setuptools>=69"]\n'
        'build-backend = "setuptools.build_meta"\n\n'
        "[project]\n"
        f'name = "{name}"\n'
        f'version = "{version}"\n'
        'description = "An environment for the CLI tests"\n'
        'keywords = ["cli-test"]\n'
        "dependencies = []\n\n"
        "[tool.setuptools.package-data]\n"
        f'{module} = ["*.bin"]\n'
    )
    (root / "README.md").write_text(f"# {name}\n")
    body = "VALUE = 1\n"
    if factory:
        body += "\n\ndef load_environment(**kwargs):\n    import prime_env\n\n    raise NotImplementedError\n"
    (root / module / "__init__.py").write_text(body)
    if data_bytes:
        (root / module / "data.bin").write_bytes(os.urandom(data_bytes))
    return root


def fresh_venv(
    path: Path,
    env: dict[str, str] | None = None,
    *,
    with_pip: bool = False,
    sees_suite: bool = False,
) -> Path:
    """A new virtualenv's python: uv's, or the standard library's `with_pip`. `sees_suite`: it
    also imports this checkout's packages (prime_cli, prime_env) through a `.pth`, but no
    environment a user installed into the checkout's own venv (`tests.support.suite_site_view`)."""
    if with_pip:
        subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, env=env)
    else:
        uv = find_uv()
        require(uv is not None, "uv")
        subprocess.run(
            [str(uv), "venv", "-q", "--python", sys.executable, str(path)], check=True, env=env
        )
    python = path / "bin" / "python"
    if sees_suite:
        site = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        view = str(suite_site_view(path.parent / f"{path.name}-suite-site"))
        Path(site, "_prime_sdk.pth").write_text(f"import site; site.addsitedir({view!r})\n")
    return python


def venv_cli(
    python: Path, env: dict[str, str], cwd: Path, timeout: float = 600
) -> Callable[..., subprocess.CompletedProcess[str]]:
    """`prime ARGS...` as `python` (a venv's) runs it in `cwd` with `env`; any exit status."""

    def prime(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(python), "-m", "prime_cli.main", *args],
            cwd=cwd, env=env, text=True, capture_output=True, timeout=timeout, check=False,
        )  # fmt: skip

    return prime


def installed(python: Path, dist: str) -> str | None:
    code = (
        "import importlib.metadata as m\n"
        f"try: print(m.version({dist!r}))\nexcept m.PackageNotFoundError: print('-')"
    )
    out = subprocess.run(
        [str(python), "-c", code], check=True, capture_output=True, text=True
    ).stdout.strip()
    return None if out == "-" else out


class SlowLink:
    """A throttled TCP relay in front of a hub, standing in for a slow network path.

    `cut()` drops every connection and stops listening (to a client, exactly what a hub
    going down looks like); `restore()` listens again on the same port. Byte counters per
    direction let a test act in the middle of a transfer.
    """

    def __init__(self, upstream_port: int, bytes_per_s: float) -> None:
        self.upstream_port = upstream_port
        self.rate = bytes_per_s
        self.sent_up = 0  # client → hub bytes since the last restore
        self.sent_down = 0  # hub → client
        self._lock = threading.Lock()
        self._conns: list[socket.socket] = []
        self._listener: socket.socket | None = None
        self.port = 0
        self.restore()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def restore(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        deadline = time.monotonic() + 30
        while True:
            try:
                sock.bind(("127.0.0.1", self.port))
                break
            except OSError:
                if time.monotonic() > deadline:
                    sock.close()
                    raise
                time.sleep(0.1)
        sock.listen(64)
        self.port = sock.getsockname()[1]
        self._listener = sock
        self.sent_up = self.sent_down = 0
        threading.Thread(target=self._accept, args=(sock,), daemon=True).start()

    def cut(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            try:
                listener.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in accept()
            except OSError:
                pass
            listener.close()
        with self._lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            try:
                conn.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
                )
                # close() alone leaves a pump blocked in recv() holding the socket open, so a
                # client waiting for the rest of a download saw nothing until its 30 s read
                # timeout; shutdown() wakes the pump and the client sees the drop at once, as
                # it does when a hub process dies.
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._conns += [client, upstream]
            for src, dst, up in ((client, upstream, True), (upstream, client, False)):
                threading.Thread(target=self._pump, args=(src, dst, up), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, up: bool) -> None:
        chunk = 64 * 1024
        try:
            while data := src.recv(chunk):
                dst.sendall(data)
                if up:
                    self.sent_up += len(data)
                else:
                    self.sent_down += len(data)
                time.sleep(len(data) / self.rate)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.cut()
