"""The hub in the test's own process: `create_app(settings)` behind FastAPI's TestClient.

Route tests need the hub's logic, not a socket: this starts in well under a second where a
`prime hub serve` subprocess takes seconds (20 s on a loaded 2-core host), and a failing test
leaves no process behind. Real servers (`hubproc.start_hub`) remain for what only they show:
pip/uv/twine against a socket, a crash mid-upload, several workers, a browser.

    with start_inproc_hub(tmp_path / "hub") as hub:
        hub.http.get(f"{hub.url}/healthz")                     # anonymous (a TestClient)
        hub.client(hub.admin_token).post("/api/v1/...", ...)   # an httpx.Client with a token
        HubClient(hub.url, token, transport=hub.transport)     # the CLI's client, in-process

`hub.url` is a made-up origin (`http://hub.test`): absolute URLs the hub hands out (upload
URLs, file URLs) point at it, and every client made here sends them to the same app.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI
from fastapi.testclient import TestClient

from hub_server.app import create_app
from hub_server.core.settings import HubSettings
from tests.hub_server.hubproc import HubAccounts

ORIGIN = "http://hub.test"


class InProcessTransport(httpx.BaseTransport):
    """httpx requests answered by the app through the TestClient (which speaks its own vendored
    httpx): the CLI's `HubClient(transport=...)` then talks to the hub without a socket."""

    _HOP = frozenset({"content-encoding", "content-length", "transfer-encoding"})

    def __init__(self, client: TestClient) -> None:
        self._client = client

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        reply = self._client.request(
            request.method, str(request.url), headers=dict(request.headers), content=request.read()
        )
        headers = [(k, v) for k, v in reply.headers.multi_items() if k.lower() not in self._HOP]
        return httpx.Response(reply.status_code, headers=headers, content=reply.content)


@dataclass
class InProcessHub(HubAccounts):
    """A hub app on a data directory, with an admin user `admin` and that user's token."""

    url: str = ORIGIN
    _main: TestClient | None = None
    _clients: list[TestClient] = field(default_factory=list)

    @property
    def http(self) -> TestClient:
        """The anonymous client; its transport carries every other client's requests too."""
        assert self._main is not None, "use start_inproc_hub()"
        return self._main

    @property
    def transport(self) -> httpx.BaseTransport:
        """An httpx transport into this app, for clients made elsewhere (the CLI's `HubClient`)."""
        return InProcessTransport(self.http)

    def client(self, token: str | None = None, **kwargs: Any) -> TestClient:
        """A client of this hub, with `token` as the bearer token on every request."""
        assert self._main is not None, "use start_inproc_hub()"
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        client = TestClient(
            self._main.app,
            base_url=self.url,
            headers=headers,
            follow_redirects=False,
            raise_server_exceptions=False,
            **kwargs,
        )
        client.portal = self._main.portal  # served by the one event loop the app started on
        self._clients.append(client)
        return client

    def start(self, app: FastAPI) -> None:
        # Entered once: the app's lifespan (its periodic sweeps) runs as under a server, and
        # one event-loop thread serves every client. A 500 is an answer the test checks.
        self._main = TestClient(
            app, base_url=self.url, follow_redirects=False, raise_server_exceptions=False
        )
        self._main.__enter__()

    def close(self) -> None:
        for client in self._clients:
            client.portal = None
            client.close()
        if self._main is not None:
            self._main.__exit__(None, None, None)
            self._main = None


@contextmanager
def start_inproc_hub(data_dir: Path, env: dict[str, str] | None = None) -> Iterator[InProcessHub]:
    """A hub app on `data_dir` (settings from `env` over `PRIME_HUB_*`), closed afterwards."""
    data_dir.mkdir(parents=True, exist_ok=True)
    hub = InProcessHub(data_dir=data_dir, env=dict(env or {}))
    hub.admin_token = hub.add_user("admin", admin=True)
    # The settings stay in the environment while the hub runs: as in a server process, S3
    # credentials (AWS_*) are read when a request reaches the store, not at start.
    saved = {key: os.environ.get(key) for key in hub.env}
    os.environ.update(hub.env)
    try:
        hub.start(create_app(HubSettings.from_env(data_dir)))
        yield hub
    finally:
        hub.close()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
