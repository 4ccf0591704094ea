"""FastAPI dependencies shared by every router.

`HubDep` gives the process state, `SessionDep` a request-scoped database session,
`PrincipalDep` the caller (or None), `AuthDep` a caller that must be authenticated,
`BaseUrlDep` the hub's external base URL for links in answers.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlmodel import Session

from hub_server.accounts.auth import Principal
from hub_server.core.errors import RateLimited, Unauthorized
from hub_server.http.principal import client_ip, resolve_principal
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


def public_base(request: Request, hub: HubDep) -> str:
    """The hub's external base URL, for links in answers: the setting, else what the client used."""
    return (hub.settings.public_url or str(request.base_url)).rstrip("/")


BaseUrlDep = Annotated[str, Depends(public_base)]
