"""Browser sign-in: a signed session cookie that names a token, and CSRF tokens for every form.

A browser cannot send `Authorization` headers on its own, so signing in with an API token
stores that token's *id* (never the secret) in a cookie signed with the hub's session secret.
Every request re-reads the token row, so revoking the token (or the user losing access) ends
the session at once. The cookie only ever authenticates web pages: API routes read the
`Authorization` header alone, so a cross-site request cannot use a browser's session there.

Forms use the double-submit pattern: a random CSRF value lives in its own signed cookie and
in a hidden field; a POST whose field does not match the cookie is refused. Both cookies are
`SameSite=Lax` and `HttpOnly`, and `Secure` when the hub is served over HTTPS.
"""

from __future__ import annotations

import hmac
import os
import secrets
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.responses import Response
from itsdangerous import BadSignature, URLSafeTimedSerializer
from sqlmodel import Session

from hub_server.accounts.auth import Principal, principal_for_token_id
from hub_server.accounts.models import ApiToken
from hub_server.core.errors import Forbidden
from hub_server.http.deps import HubDep, SessionDep
from hub_server.http.principal import resolve_principal
from hub_server.http.state import Hub

SESSION_COOKIE = "hub_session"
CSRF_COOKIE = "hub_csrf"
CSRF_FIELD = "csrf_token"
SESSION_MAX_AGE = 14 * 24 * 3600
SECRET_ENV = "PRIME_HUB_SESSION_SECRET"
_SECRET_FILE = "session-secret"

_serializers: dict[str, URLSafeTimedSerializer] = {}


def session_secret(hub: Hub) -> str:
    """The key that signs cookies: `PRIME_HUB_SESSION_SECRET`, else a random key kept in the
    data directory (created once, mode 0600) so restarts and workers sharing the directory
    agree. Workers on several hosts must share the variable."""
    configured = os.environ.get(SECRET_ENV)
    if configured:
        return configured
    path = Path(hub.settings.data_dir) / _SECRET_FILE
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    candidate = secrets.token_urlsafe(48)
    try:
        # O_EXCL: of two workers starting together, one writes and both read its key.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()
    with os.fdopen(fd, "w") as handle:
        handle.write(candidate)
    return candidate


def _serializer(hub: Hub) -> URLSafeTimedSerializer:
    key = session_secret(hub)
    serializer = _serializers.get(key)
    if serializer is None:
        serializer = _serializers[key] = URLSafeTimedSerializer(key, salt="hub-web")
    return serializer


def _load(hub: Hub, value: str | None) -> Any:
    if not value:
        return None
    try:
        return _serializer(hub).loads(value, max_age=SESSION_MAX_AGE)
    except BadSignature:
        return None


def _secure(request: Request) -> bool:
    return request.url.scheme == "https"


def start_session(request: Request, response: Response, hub: Hub, token: ApiToken) -> None:
    """Sign the browser in as `token` (its id only) and rotate the CSRF value."""
    response.set_cookie(
        SESSION_COOKIE,
        _serializer(hub).dumps({"token_id": token.id}),
        max_age=SESSION_MAX_AGE,
        httponly=True,
        samesite="lax",
        secure=_secure(request),
    )
    set_csrf_cookie(request, response, hub, secrets.token_urlsafe(32))


def end_session(response: Response) -> None:
    response.delete_cookie(SESSION_COOKIE)


def _session_principal(request: Request, hub: Hub, session: Session) -> Principal | None:
    if request.headers.get("authorization"):
        return resolve_principal(request, hub, session)
    data = _load(hub, request.cookies.get(SESSION_COOKIE))
    if not isinstance(data, dict) or not isinstance(data.get("token_id"), str):
        return None
    return principal_for_token_id(session, data["token_id"])


def web_principal(request: Request, hub: HubDep, session: SessionDep) -> Principal | None:
    """The caller of a web page: an `Authorization` header as on the API, else the session
    cookie's token, checked again against the database on every request. The name is kept
    on `request.state.viewer` for the page header."""
    principal = _session_principal(request, hub, session)
    request.state.viewer = principal.user.username if principal else None
    return principal


WebPrincipalDep = Annotated[Principal | None, Depends(web_principal)]


def csrf_value(request: Request, hub: Hub) -> str:
    """This browser's CSRF value (from its cookie), or a new one to be set on the response."""
    current = _load(hub, request.cookies.get(CSRF_COOKIE))
    if isinstance(current, str) and current:
        return current
    fresh: str = getattr(request.state, "new_csrf", "") or secrets.token_urlsafe(32)
    request.state.new_csrf = fresh
    return fresh


def set_csrf_cookie(request: Request, response: Response, hub: Hub, value: str) -> None:
    response.set_cookie(
        CSRF_COOKIE,
        _serializer(hub).dumps(value),
        max_age=SESSION_MAX_AGE,
        httponly=True,
        samesite="lax",
        secure=_secure(request),
    )


def remember_csrf(request: Request, response: Response, hub: Hub) -> None:
    """Set the CSRF cookie when this request minted a new value for a form it rendered."""
    fresh = getattr(request.state, "new_csrf", "")
    if fresh:
        set_csrf_cookie(request, response, hub, fresh)


def check_csrf(request: Request, hub: Hub, submitted: str | None) -> None:
    """Refuse a form POST whose hidden field does not match this browser's CSRF cookie."""
    expected = _load(hub, request.cookies.get(CSRF_COOKIE))
    if (
        not isinstance(expected, str)
        or not submitted
        or not hmac.compare_digest(expected.encode(), submitted.encode())
    ):
        raise Forbidden(
            "The form expired or came from another site; reload the page and submit it again."
        )
