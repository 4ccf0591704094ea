"""Issue 26, class 4: no request holds two database connections at once. A download counted
with a second connection while the request held its first starved the pool at ~32
concurrent downloads (every request waiting for a second connection none would give back).

The pool's checkouts are attributed to the request that made them (a context variable set
around each ASGI call, which the thread-pool hops and background tasks inherit), and every
kind of request is sent: reads, pages, the index, downloads, both upload paths, eval writes,
the web's forms. The most connections any one request held at once must be 1.
"""

from __future__ import annotations

import contextvars
import hashlib
import itertools
import re
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from sqlalchemy import event
from sqlmodel import Session

from hub_server.accounts.models import ApiToken
from tests.hub_server.hardening_hub import HardenedHub
from tests.hub_server.web.signin import csrf_of
from tests.hub_server.wheels import source_archive_bytes, twine_upload_form, wheel_bytes

_REQUEST: contextvars.ContextVar[str | None] = contextvars.ContextVar("request", default=None)


class ConnectionsPerRequest:
    """The most pool connections each request (method and path) held at the same time."""

    def __init__(self, engine: sa.Engine) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, int] = {}
        self.peak: dict[str, int] = {}
        event.listen(engine.pool, "checkout", self._checkout)
        event.listen(engine.pool, "checkin", self._checkin)

    def _checkout(self, _dbapi: Any, record: Any, _proxy: Any) -> None:
        request = _REQUEST.get()
        if request is None:
            return
        record.info["request"] = request
        with self._lock:
            self._held[request] = self._held.get(request, 0) + 1
            label = request.split("#", 1)[1]
            self.peak[label] = max(self.peak.get(label, 0), self._held[request])

    def _checkin(self, _dbapi: Any, record: Any) -> None:
        request = record.info.pop("request", None)
        if request is not None:
            with self._lock:
                self._held[request] -= 1


_ids = itertools.count()


def counted(app: Any) -> Any:
    """`app` with each HTTP request's checkouts attributed to it."""

    async def wrapper(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await app(scope, receive, send)
        path = re.sub(r"[0-9a-f]{32}", "ID", scope["path"])
        token = _REQUEST.set(f"{next(_ids)}#{scope['method']} {path}")
        try:
            await app(scope, receive, send)
        finally:
            _REQUEST.reset(token)

    return wrapper


@pytest.fixture
def hub(tmp_path: Any) -> Iterator[tuple[HardenedHub, TestClient, ConnectionsPerRequest]]:
    hub = HardenedHub(tmp_path)
    meter = ConnectionsPerRequest(hub.engine)
    with TestClient(counted(hub.app), raise_server_exceptions=False) as client:
        yield hub, client, meter


def _stale_tokens(hub: HardenedHub) -> None:
    """Every token's last use long ago, so the next request records its use again."""
    with Session(hub.engine) as session:
        session.execute(sa.update(ApiToken).values(last_used_at=None))
        session.commit()


def test_no_request_holds_two_connections(
    hub: tuple[HardenedHub, TestClient, ConnectionsPerRequest],
) -> None:
    hub_, client, meter = hub
    token = hub_.tokens["alice"]
    bearer = {"Authorization": f"Bearer {token}"}

    def call(method: str, path: str, **kwargs: Any) -> Any:
        _stale_tokens(hub_)
        answer = client.request(method, path, **kwargs)
        assert answer.status_code < 500, (method, path, answer.text[-500:])
        return answer

    # Both upload paths.
    data = wheel_bytes("wordle", "0.2.0")
    fields, files = twine_upload_form("wordle", "0.2.0", data)
    call("POST", "/alice/legacy/", auth=("__token__", token), data=fields, files=files)
    api = "/api/v1/environmentshub"
    env_id = call("POST", f"{api}/resolve", headers=bearer, json={"name": "wordle"}).json()["data"][
        "id"
    ]
    body = source_archive_bytes({"wordle.py": b"X = 1\n"})
    reserved = call("POST", f"{api}/{env_id}/versions", headers=bearer, json={
        "filename": "wordle-0.2.0-abcd.tar.gz", "semantic_version": "0.2.0",
        "sha256": hashlib.sha256(body).hexdigest(), "size": len(body)}).json()["data"]  # fmt: skip
    call("PUT", reserved["upload_url"].removeprefix("http://testserver"), content=body)
    call("POST", f"{api}/{env_id}/versions/{reserved['version_id']}/finalize", headers=bearer)
    # Reads: API, index, downloads, pages, as anonymous and with a token.
    wheel_path = "/alice/files/wordle/wordle-0.2.0-py3-none-any.whl"
    for headers in ({}, bearer):
        for path in (f"{api}/alice/wordle", f"{api}/alice/wordle/@latest", "/alice/simple/",
                     "/alice/simple/wordle/", wheel_path, f"{wheel_path}.metadata", "/",
                     "/alice", "/alice/wordle", "/alice/wordle/v/0.2.0", "/api/v1/user/whoami"):  # fmt: skip
            call("GET", path, headers=headers)
    # Eval writes and the pages that read them.
    run = call("POST", "/api/v1/evaluations/", headers=bearer, json={
        "name": "r", "environments": [{"slug": "alice/wordle"}], "model_name": "m",
        "is_public": True}).json()["data"]["id"]  # fmt: skip
    call("POST", f"/api/v1/evaluations/{run}/samples", headers=bearer,
         json={"samples": [{"example_index": 0, "reward": 1.0}]})  # fmt: skip
    call("POST", f"/api/v1/evaluations/{run}/finalize", headers=bearer, json={})
    for path in (f"/alice/wordle/evals/{run}", f"/api/v1/evaluations/{run}/samples",
                 f"/alice/wordle/compare?a={run}&b={run}"):  # fmt: skip
        call("GET", path)
    # The web's forms.
    login = call("GET", "/login")
    call("POST", "/login", data={"csrf_token": csrf_of(login.text), "token": token, "next": "/"})
    page = call("GET", "/settings/tokens")
    call(
        "POST",
        "/settings/tokens",
        data={"csrf_token": csrf_of(page.text), "name": "n", "scope": "read"},
    )
    assert meter.peak, "no checkout was attributed to a request"
    over = {request: held for request, held in meter.peak.items() if held > 1}
    assert not over, "\n".join(sorted(over))
