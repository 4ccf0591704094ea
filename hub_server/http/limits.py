"""Every request is bounded before the hub reads its body (an ASGI middleware).

FastAPI reads a JSON or form body before a route's dependencies run, so a route cannot refuse
an oversized or unauthenticated body in time. This middleware runs first and decides from the
headers alone: the token is checked (401 before any byte is read), the body limit is chosen
by route and caller, a declared size over it is a 413 and a streaming one is cut off at it.
The rules, in full, are in docs/security.md ("The request path").
"""

from __future__ import annotations

import json
import re

from sqlmodel import Session
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from hub_server.accounts.auth import Principal
from hub_server.core.errors import HubError
from hub_server.http.http_protocol import REASON_HEADER, latin1_reason
from hub_server.http.principal import AUTH_DEFERRED_KEY, PRINCIPAL_KEY, resolve_principal
from hub_server.http.state import Hub
from registry_index.schemas.errors import ErrorBody

# The REST upload URL: its `?token=` is the credential, checked by the route before reading.
_UPLOAD_URL = re.compile(r"^/api/v1/environmentshub/uploads/[^/]+/?$")
_LEGACY = re.compile(r"^/(?:[^/]+/)?legacy/?$")
# An adapter push: its two PEFT files in one multipart body (adapters.api).
_ADAPTER_PUSH = re.compile(r"^/api/v1/adapters/[^/]+/[^/]+/versions/?$")
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class BodyTooLarge(Exception):
    """Raised from `receive` when a streaming body passes its limit."""


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return str(value.decode("latin-1"))
    return None


def _is_api(path: str) -> bool:
    return path.startswith(("/api/", "/lab/")) or bool(_LEGACY.match(path))


def _limit_for(hub: Hub, scope: Scope) -> tuple[int, bool]:
    """(byte limit, whether the credential travels in the URL) for this request."""
    path = scope.get("path", "")
    if scope.get("method") == "PUT" and _UPLOAD_URL.match(path):
        return hub.settings.request_body_limit, True
    if _LEGACY.match(path) or (scope.get("method") == "POST" and _ADAPTER_PUSH.match(path)):
        return hub.settings.request_body_limit, False
    return hub.settings.max_json_bytes, False


def _route_authenticates(hub: Hub, scope: Scope, declared: int | None) -> bool:
    """True for a small twine upload, which its route authenticates (see the module doc)."""
    small = declared is not None and declared <= hub.settings.max_anonymous_body_bytes
    return small and bool(_LEGACY.match(scope.get("path", "")))


async def _respond(send: Send, status: int, message: str, headers: dict[str, str]) -> None:
    body = json.dumps(ErrorBody(detail=message).model_dump()).encode()
    raw = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
        (REASON_HEADER, latin1_reason(message).encode("latin-1")),
    ]
    raw.extend((k.lower().encode(), v.encode("latin-1")) for k, v in headers.items())
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


def _too_large_message(limit: int) -> str:
    return (
        f"The request body is larger than this hub accepts here ({limit} bytes); "
        "send a smaller file or batch."
    )


class RequestLimitsMiddleware:
    """Authenticate and size-check a request before its body is read; see the module doc."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if "\x00" in scope.get("path", ""):
            # No name on the hub holds a NUL, and PostgreSQL refuses one in a query parameter
            # (a 500 from whichever route took it as an owner, project or filename).
            await _respond(send, 400, "The URL path contains a NUL character (%00).", {})
            return
        hub: Hub = scope["app"].state.hub
        limit, token_in_url = _limit_for(hub, scope)
        declared_text = _header(scope, b"content-length")
        declared = int(declared_text) if declared_text and declared_text.isdigit() else None
        has_body = (
            (declared or 0) > 0
            or _header(scope, b"transfer-encoding") is not None
            # Neither header: HTTP/1.1 means no body, but an HTTP/2 server may deliver one
            # unframed, of a size nobody bounded; a method that carries a body is treated as
            # carrying one, so its token is checked (or the anonymous limit applies) first.
            or (declared_text is None and scope.get("method") in _BODY_METHODS)
        )
        if has_body and not token_in_url:
            principal = None
            if _route_authenticates(hub, scope, declared):
                scope[AUTH_DEFERRED_KEY] = True
            elif _header(scope, b"authorization") or _header(scope, b"x-api-key"):
                try:
                    principal = await run_in_threadpool(_authenticate, scope, hub)
                except HubError as error:
                    await _respond(send, error.status, error.message, error.headers)
                    return
                scope[PRINCIPAL_KEY] = principal
            if principal is None:  # no token (or a header that names none): anonymous
                anonymous_limit = hub.settings.max_anonymous_body_bytes
                if (declared or 0) > anonymous_limit and _is_api(scope.get("path", "")):
                    await _respond(
                        send,
                        401,
                        "This needs an API token: send `Authorization: Bearer <token>` "
                        "(prime login) or basic auth `__token__:<token>` (twine, uv).",
                        {"WWW-Authenticate": 'Basic realm="prime-hub"'},
                    )
                    return
                limit = min(limit, anonymous_limit)
        if declared is not None and declared > limit:
            await _respond(send, 413, _too_large_message(limit), {})
            return
        await _Guard(self.app, limit).run(scope, receive, send)


def _authenticate(scope: Scope, hub: Hub) -> Principal | None:
    with Session(hub.engine, expire_on_commit=False) as session:
        return resolve_principal(Request(scope), hub, session)


class _Guard:
    """Counts body bytes as they stream in; past the limit, the answer is a 413 whatever the
    route does with the error (FastAPI would turn it into a 400 'error parsing the body')."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit
        self.received = 0
        self.exceeded = False
        self.started = False

    async def run(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def limited_receive() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                self.received += len(message.get("body", b""))
                if self.received > self.limit:
                    self.exceeded = True
                    raise BodyTooLarge(self.limit)
            return message

        async def guarded_send(message: Message) -> None:
            if self.exceeded:
                if not self.started:
                    self.started = True
                    await _respond(send, 413, _too_large_message(self.limit), {})
                return  # the route's own answer to the cut-off body is dropped
            if message["type"] == "http.response.start":
                self.started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except Exception:
            if not self.exceeded:
                raise
            if not self.started:
                self.started = True
                await _respond(send, 413, _too_large_message(self.limit), {})
