"""FastAPI dependencies shared by every router (also the extension point for evals and web).

`HubDep` gives the process state, `SessionDep` a request-scoped database session,
`PrincipalDep` the caller (or None), `AuthDep` a caller that must be authenticated.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlmodel import Session

from hub_server.accounts.auth import Principal, authenticate, credentials_from_header
from hub_server.core.errors import RateLimited, Unauthorized
from hub_server.http.limits import PRINCIPAL_KEY
from hub_server.http.state import Hub


def get_hub(request: Request) -> Hub:
    hub: Hub = request.app.state.hub
    return hub


HubDep = Annotated[Hub, Depends(get_hub)]


def get_session(hub: HubDep) -> Iterator[Session]:
    """A session for one request; routes commit explicitly when they write."""
    with Session(hub.engine, expire_on_commit=False) as session:
        yield session


SessionDep = Annotated[Session, Depends(get_session)]


def client_ip(request: Request) -> str:
    return request.client.host if request.client else "unknown"


def resolve_principal(request: Request, hub: Hub, session: Session) -> Principal | None:
    """The caller behind the Authorization header; None when anonymous.

    A wrong token is a 401 (never silently anonymous), and failed attempts are rate limited
    per client IP so tokens cannot be guessed at speed. The request-limits middleware already
    authenticated a request that carries a body; its answer is reused.
    """
    if PRINCIPAL_KEY in request.scope:
        cached: Principal | None = request.scope[PRINCIPAL_KEY]
        return cached
    token = credentials_from_header(request.headers.get("authorization"))
    if token is None:
        return None
    ip = client_ip(request)
    wait = hub.login_limiter.retry_after(ip)
    if wait is not None:
        raise RateLimited(
            f"Too many failed logins from {ip}; wait {wait} s before trying again.", wait
        )
    principal = authenticate(session, token)
    if principal is None:
        hub.login_limiter.hit(ip)
        raise Unauthorized(
            "Invalid or revoked API token; check PRIME_API_KEY or create a new token with "
            "`prime hub token create`."
        )
    return principal


def get_principal(request: Request, hub: HubDep, session: SessionDep) -> Principal | None:
    return resolve_principal(request, hub, session)


PrincipalDep = Annotated[Principal | None, Depends(get_principal)]


def require_principal(principal: PrincipalDep) -> Principal:
    if principal is None:
        raise Unauthorized(
            "This needs an API token: send `Authorization: Bearer <token>` (prime login) or "
            "basic auth `__token__:<token>` (twine, uv)."
        )
    return principal


AuthDep = Annotated[Principal, Depends(require_principal)]


def check_upload_rate(request: Request, hub: Hub, principal: Principal) -> None:
    """Count one upload against the token's and the client IP's budgets."""
    for key in (f"token:{principal.token.id}", f"ip:{client_ip(request)}"):
        wait = hub.upload_limiter.hit(key)
        if wait is not None:
            raise RateLimited(f"Too many uploads; wait {wait} s before uploading again.", wait)
