"""Browser sign-in: a signed session cookie naming a server-side session, and CSRF values
bound to it.

A browser cannot send `Authorization` headers on its own, so signing in with an API token
opens a session row (`accounts.models.WebSession`, which names the token, never its secret)
and the cookie carries that session's random secret, signed with the hub's session secret.
Every request re-reads the session and the token, so signing out (the row is ended), revoking
the token or the user losing access ends the session at once, for every copy of the cookie.
The cookie only ever authenticates web pages: API routes read the `Authorization` header
alone, so a cross-site request cannot use a browser's session there.

Every form carries a CSRF value. In a signed-in browser it is derived from the session's
secret (an HMAC under the hub's key), so it is bound to that session: a value from another
session, or a CSRF cookie planted in the browser, is refused. A browser without a session
(the sign-in form) uses the double-submit pattern: a random value in its own signed cookie
and in the hidden field. Cookies are `SameSite=Lax` and `HttpOnly`, and `Secure` when the
hub is served over HTTPS.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.responses import Response
from itsdangerous import BadSignature, URLSafeTimedSerializer
from sqlmodel import Session

from hub_server.accounts import service as accounts
from hub_server.accounts.auth import Principal
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


def start_session(
    request: Request, response: Response, hub: Hub, session: Session, principal: Principal
) -> None:
    """Sign the browser in as `principal`'s token: a new server-side session, its secret in
    the cookie. Forms rendered from now on carry a CSRF value bound to it."""
    secret = accounts.open_web_session(session, principal)
    response.set_cookie(
        SESSION_COOKIE,
        _serializer(hub).dumps({"session": secret}),
        max_age=SESSION_MAX_AGE,
        httponly=True,
        samesite="lax",
        secure=_secure(request),
    )


def _session_secret(request: Request, hub: Hub) -> str | None:
    """The session secret of this browser's cookie (signature and age checked, not the row)."""
    data = _load(hub, request.cookies.get(SESSION_COOKIE))
    if not isinstance(data, dict) or not isinstance(data.get("session"), str):
        return None
    return str(data["session"])


def end_session(request: Request, response: Response, hub: Hub, session: Session) -> None:
    """Sign out: the session ends on the server (every copy of the cookie stops working) and
    the browser drops the cookie."""
    secret = _session_secret(request, hub)
    if secret is not None:
        accounts.end_web_session(session, secret)
    response.delete_cookie(SESSION_COOKIE)


def _session_principal(request: Request, hub: Hub, session: Session) -> Principal | None:
    if request.headers.get("authorization"):
        return resolve_principal(request, hub, session)
    secret = _session_secret(request, hub)
    if secret is None:
        return None
    return accounts.web_session_principal(session, secret, timedelta(seconds=SESSION_MAX_AGE))


def web_principal(request: Request, hub: HubDep, session: SessionDep) -> Principal | None:
    """The caller of a web page: an `Authorization` header as on the API, else the session
    cookie's token, checked again against the database on every request. The name is kept
    on `request.state.viewer` for the page header."""
    principal = _session_principal(request, hub, session)
    request.state.viewer = principal.user.username if principal else None
    return principal


WebPrincipalDep = Annotated[Principal | None, Depends(web_principal)]


def _bound_csrf(hub: Hub, secret: str) -> str:
    """The CSRF value of a signed-in session: an HMAC of its secret under the hub's key."""
    key = session_secret(hub).encode()
    return hmac.new(key, b"csrf:" + secret.encode(), hashlib.sha256).hexdigest()


def csrf_value(request: Request, hub: Hub) -> str:
    """The CSRF value this browser's forms carry: bound to its session when it has one, else
    its CSRF cookie's value, or a new one to be set on the response."""
    secret = _session_secret(request, hub)
    if secret is not None:
        return _bound_csrf(hub, secret)
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
    """Refuse a form POST whose hidden field is not this browser's CSRF value (`csrf_value`:
    bound to its session when it has one, so a planted CSRF cookie does not help)."""
    secret = _session_secret(request, hub)
    if secret is not None:
        expected: object = _bound_csrf(hub, secret)
    else:
        expected = _load(hub, request.cookies.get(CSRF_COOKIE))
    if (
        not isinstance(expected, str)
        or not submitted
        or not hmac.compare_digest(expected.encode(), submitted.encode())
    ):
        raise Forbidden(
            "The form expired or came from another site; reload the page and submit it again."
        )
