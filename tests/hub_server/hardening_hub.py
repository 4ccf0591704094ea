"""An in-process hub for the hardening tests (issue 9): `create_app(settings)` with users, an
org and environments with versions, and raw ASGI calls that count how many body bytes the app
pulled, so a test sees whether a refusal came before or after the body was read.

    hub = HardenedHub(tmp_path, max_json_bytes=1024)
    with hub.client() as client: ...
    status, pulled = asyncio.run(hub.raw("POST", "/api/v1/…", body_size=1 << 30))
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlmodel import Session, select

from hub_server.accounts.models import Owner
from hub_server.admin import create_org, create_token, create_user
from hub_server.app import create_app
from hub_server.core.settings import HubSettings
from hub_server.registry.models import Version
from hub_server.registry.publishing import create_environment


class HardenedHub:
    """Users alice (member of org acme), bob and carol; envs alice/wordle (public, 0.1.0),
    alice/other (public, 1.0.0), acme/secret (private, 1.0.0)."""

    def __init__(self, root: Path, **settings: Any) -> None:
        self.settings = HubSettings(data_dir=root, **settings)
        self.app: FastAPI = create_app(self.settings)
        self.engine = self.app.state.hub.engine
        for name in ("alice", "bob", "carol"):
            create_user(self.engine, name)
        create_org(self.engine, "acme", ["alice"])
        self.tokens: dict[str, str] = {
            "alice": self.token("alice", ["all"]),
            "bob": self.token("bob", ["all"]),
            "carol": self.token("carol", ["all"]),
        }
        self.env_ids: dict[str, str] = {}
        with Session(self.engine, expire_on_commit=False) as session:
            for owner_name, env_name, visibility, version in (
                ("alice", "wordle", "public", "0.1.0"),
                ("alice", "other", "public", "1.0.0"),
                ("acme", "secret", "private", "1.0.0"),
            ):
                owner = session.exec(select(Owner).where(Owner.name == owner_name)).one()
                env = create_environment(session, owner, env_name, visibility=visibility)
                session.add(
                    Version(environment_id=env.id, version=version, canonical_version=version)
                )
                self.env_ids[f"{owner_name}/{env_name}"] = env.id
            session.commit()

    def token(self, user: str, scopes: list[str]) -> str:
        return create_token(self.engine, user, "t", scopes)[0]

    @contextmanager
    def client(self) -> Iterator[TestClient]:
        """A TestClient (its context runs the app's lifespan: the upkeep sweeps)."""
        with TestClient(self.app, raise_server_exceptions=False) as client:
            yield client

    async def raw(
        self,
        method: str,
        path: str,
        *,
        token: str | None = None,
        basic: bool = False,
        body_size: int = 0,
        declare_length: bool = True,
        content_type: str = "application/json",
        query: str = "",
        chunk: int = 1024 * 1024,
        hold: asyncio.Event | None = None,
        held: asyncio.Event | None = None,
        prefix: bytes = b"",
    ) -> tuple[int, int]:
        """Send `body_size` bytes of body in chunks; return (status, body bytes the app read).

        Nothing is generated ahead: each chunk is made when the app asks for it, so a hub that
        reads everything shows up as a large count. With `hold`, the body stops after its
        first chunk until the event is set, and `held` is set once the app waits there (it is
        mid-body); `prefix` starts the body.
        """
        headers = [(b"content-type", content_type.encode())]
        if declare_length:
            headers.append((b"content-length", str(body_size).encode()))
        else:
            headers.append((b"transfer-encoding", b"chunked"))
        if token is not None:
            value = (
                "Basic " + base64.b64encode(f"__token__:{token}".encode()).decode()
                if basic
                else f"Bearer {token}"
            )
            headers.append((b"authorization", value.encode()))
        pulled = 0
        block = b"x" * chunk

        async def receive() -> dict[str, Any]:
            nonlocal pulled
            if pulled >= body_size > 0:
                return {"type": "http.disconnect"}
            if pulled > 0 and hold is not None:
                if held is not None:
                    held.set()
                await hold.wait()
            part = block[: min(chunk, body_size - pulled)]
            if pulled == 0 and prefix:
                part = prefix + part[len(prefix) :]
            pulled += len(part)
            return {"type": "http.request", "body": part, "more_body": pulled < body_size}

        status = await self.send_raw(method, path, headers, receive, query=query)
        return status, pulled

    async def send_raw(
        self,
        method: str,
        path: str,
        headers: list[tuple[bytes, bytes]],
        receive: Callable[[], Awaitable[dict[str, Any]]],
        *,
        http_version: str = "1.1",
        query: str = "",
    ) -> int:
        """Call the app as a server would, the body coming from `receive` message by message
        (cut off, unframed, lying about its length: whatever the test makes it); the status."""
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": http_version,
            "method": method,
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": query.encode(),
            "root_path": "",
            "headers": headers,
            "client": ("127.0.0.1", 50000),
            "server": ("testserver", 80),
            "app": self.app,
        }
        status = 0

        async def send(message: MutableMapping[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])

        await self.app(scope, receive, send)
        return status
