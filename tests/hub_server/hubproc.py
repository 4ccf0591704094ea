"""Start a real hub server in a subprocess, for what needs a socket: pip/uv/twine, crashes,
several workers, a browser (route logic is tested in-process: tests/hub_server/inproc.py).

    from tests.hub_server.hubproc import start_hub
    with start_hub(tmp_path / "hub") as hub:
        hub.url, hub.admin_token, hub.add_user("bob")

The server runs `prime hub serve` on a free loopback port with its own data directory;
extra settings (PostgreSQL URL, S3 storage) go in `env`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Self

import httpx

from hub_server.admin import create_token, create_user, open_database
from hub_server.core.settings import HubSettings
from tests.support import free_port

PRIME = Path(sys.executable).with_name("prime")


@dataclass(kw_only=True)
class HubAccounts:
    """A hub's data directory and settings, and users made straight in its database."""

    data_dir: Path
    env: dict[str, str] = field(default_factory=dict)
    admin_token: str = ""

    @property
    def settings(self) -> HubSettings:
        saved = {k: os.environ.get(k) for k in self.env}
        os.environ.update(self.env)
        try:
            return HubSettings.from_env(self.data_dir)
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value

    def add_user(self, name: str, *, admin: bool = False, scopes: list[str] | None = None) -> str:
        """Create a user (in the hub's database) and return a token for it."""
        engine = open_database(self.settings)
        try:
            create_user(engine, name, admin=admin)
            secret, _ = create_token(engine, name, "test", scopes)
            return secret
        finally:
            engine.dispose()

    def token_for(self, name: str, scopes: list[str]) -> str:
        """Another token for an existing user."""
        engine = open_database(self.settings)
        try:
            return create_token(engine, name, "scoped", scopes)[0]
        finally:
            engine.dispose()


@dataclass(kw_only=True)
class HubProcess(HubAccounts):
    """A running hub: its URL, data directory, admin user `admin` and that user's token."""

    url: str
    port: int
    process: subprocess.Popen[bytes] | None = None
    log_path: Path = field(default_factory=Path)

    def start(self, timeout: float = 240.0) -> None:
        """Start (or restart) the server and wait until it answers (generous: CI hosts get busy)."""
        command = [str(PRIME), "hub", "serve", "--host", "127.0.0.1", "--port", str(self.port)]
        command += ["--data-dir", str(self.data_dir)]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                command, env={**os.environ, **self.env}, stdout=log, stderr=subprocess.STDOUT
            )
        # Ready means /healthz answers; the deadline only bounds a hub that hangs. Whatever
        # ends the wait early (an error, Ctrl-C) kills the child: no server outlives a failure.
        try:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise RuntimeError(f"hub exited early:\n{self.log_path.read_text()[-4000:]}")
                try:
                    if httpx.get(f"{self.url}/healthz", timeout=1.0).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                time.sleep(0.05)
            raise RuntimeError(
                f"hub did not start in {timeout} s:\n{self.log_path.read_text()[-4000:]}"
            )
        except BaseException:
            self.kill()
            raise

    def kill(self) -> None:
        """SIGKILL the server (crash simulation)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def start_hub(data_dir: Path, env: dict[str, str] | None = None) -> HubProcess:
    """A started hub with an admin user `admin` (token in `.admin_token`)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    hub = HubProcess(
        url=f"http://127.0.0.1:{port}",
        data_dir=data_dir,
        env=dict(env or {}),
        port=port,
        log_path=data_dir / "server.log",
    )
    hub.admin_token = hub.add_user("admin", admin=True)
    hub.start()
    return hub
