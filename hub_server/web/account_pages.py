"""Sign-in, sign-out and the tokens page.

The hub has no passwords: people sign in with an API token (`prime hub token create`, or one
made on this page), which also decides what the browser may see, exactly as it would on the
API. The forms call the same account operations as the API would (`accounts.service`), which
check the scopes: creating a token or revoking another needs a session signed in with an
`all` token, so a narrow token (say `read`) can never mint a broader one or revoke one.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from hub_server.accounts import service as accounts
from hub_server.accounts.auth import (
    Principal,
    authenticate,
)
from hub_server.core.errors import BadRequest, HubError
from hub_server.http.deps import HubDep, SessionDep
from hub_server.http.principal import client_ip
from hub_server.web.pages import page
from hub_server.web.session import (
    CSRF_FIELD,
    WebPrincipalDep,
    check_csrf,
    end_session,
    start_session,
)

router = APIRouter(include_in_schema=False)

CsrfField = Annotated[str, Form(alias=CSRF_FIELD, max_length=200)]


def _safe_next(target: str) -> str:
    """Only same-site paths: `//evil.example` or `https://…` would be an open redirect."""
    if target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return "/"


@router.get("/login", response_class=HTMLResponse)
def login_form(request: Request, principal: WebPrincipalDep, next: str = "/") -> Response:
    return page(request, "login.html", next=_safe_next(next), error=None)


@router.post("/login", response_class=HTMLResponse)
def login(
    request: Request,
    hub: HubDep,
    session: SessionDep,
    csrf: CsrfField = "",
    token: Annotated[str, Form(max_length=200)] = "",
    next: Annotated[str, Form(max_length=500)] = "/",
) -> Response:
    try:
        check_csrf(request, hub, csrf)
    except HubError as exc:
        return page(
            request, "login.html", status_code=403, next=_safe_next(next), error=exc.message
        )
    ip = client_ip(request)
    wait = hub.login_limiter.retry_after(ip)
    if wait is not None:
        message = f"Too many failed sign-ins from {ip}; wait {wait} s and try again."
        return page(request, "login.html", status_code=429, next=_safe_next(next), error=message)
    principal = authenticate(session, token.strip())
    if principal is None:
        hub.login_limiter.hit(ip)
        message = (
            "That token is not valid or was revoked. Create one with "
            "`prime hub token create USER NAME` (or on the tokens page once signed in)."
        )
        return page(request, "login.html", status_code=401, next=_safe_next(next), error=message)
    response = RedirectResponse(_safe_next(next), status_code=303)
    start_session(request, response, hub, session, principal)
    return response


@router.post("/logout")
def logout(request: Request, hub: HubDep, session: SessionDep, csrf: CsrfField = "") -> Response:
    try:
        check_csrf(request, hub, csrf)
    except HubError as exc:
        return page(
            request, "message.html", status_code=403, title="Not signed out", text=exc.message
        )
    response = RedirectResponse("/", status_code=303)
    end_session(request, response, hub, session)
    return response


def _token_rows(session: SessionDep, principal: Principal) -> list[dict[str, Any]]:
    rows = accounts.tokens_of(session, principal.user.id)
    return [
        {
            "id": row.id,
            "name": row.name,
            "scopes": row.scopes,
            "created_at": row.created_at,
            "last_used_at": row.last_used_at,
            "revoked": row.revoked_at is not None,
            "current": row.id == principal.token.id,
        }
        for row in rows
    ]


def _tokens_page(
    request: Request,
    session: SessionDep,
    principal: Principal,
    *,
    status_code: int = 200,
    error: str | None = None,
    new_secret: str | None = None,
) -> Response:
    return page(
        request,
        "tokens.html",
        status_code=status_code,
        tokens=_token_rows(session, principal),
        can_manage=principal.may_manage_tokens(),
        error=error,
        new_secret=new_secret,
    )


def _sign_in_first(request: Request) -> Response:
    return RedirectResponse(f"/login?next={request.url.path}", status_code=303)


@router.get("/settings/tokens", response_class=HTMLResponse)
def tokens_page(request: Request, session: SessionDep, principal: WebPrincipalDep) -> Response:
    if principal is None:
        return _sign_in_first(request)
    return _tokens_page(request, session, principal)


@router.post("/settings/tokens", response_class=HTMLResponse)
def create_token(
    request: Request,
    hub: HubDep,
    session: SessionDep,
    principal: WebPrincipalDep,
    csrf: CsrfField = "",
    name: Annotated[str, Form(max_length=128)] = "",
    scope: Annotated[str, Form(max_length=300)] = "read",
) -> Response:
    if principal is None:
        return _sign_in_first(request)
    try:
        check_csrf(request, hub, csrf)
        try:
            scopes = accounts.token_scopes(name, scope.split())
        except ValueError as exc:
            raise BadRequest(str(exc)) from None
        secret = accounts.create_own_token(session, principal, name.strip(), scopes)
    except HubError as exc:
        return _tokens_page(request, session, principal, status_code=exc.status, error=exc.message)
    return _tokens_page(request, session, principal, status_code=201, new_secret=secret)


@router.post("/settings/tokens/{token_id}/revoke", response_class=HTMLResponse)
def revoke_token(
    token_id: str,
    request: Request,
    hub: HubDep,
    session: SessionDep,
    principal: WebPrincipalDep,
    csrf: CsrfField = "",
) -> Response:
    if principal is None:
        return _sign_in_first(request)
    try:
        check_csrf(request, hub, csrf)
        row = accounts.revoke_own_token(session, principal, token_id)
    except HubError as exc:
        return _tokens_page(request, session, principal, status_code=exc.status, error=exc.message)
    if row is None:
        return _tokens_page(
            request, session, principal, status_code=404, error="No such token of yours."
        )
    if row.id == principal.token.id:  # revoking the session's own token signs out
        response = RedirectResponse("/", status_code=303)
        end_session(request, response, hub, session)
        return response
    return RedirectResponse("/settings/tokens", status_code=303)
