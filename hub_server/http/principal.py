"""Who is calling: the principal behind a request's `Authorization` header.

Shared by the FastAPI dependencies (`http.deps`) and the request-limits middleware
(`http.limits`), which authenticates a request with a body before any route reads it and
leaves its answer in the ASGI scope under `PRINCIPAL_KEY` for the route to reuse.
"""

from __future__ import annotations

from sqlmodel import Session
from starlette.requests import Request

from hub_server.accounts.auth import (
    Principal,
    authenticate,
    credentials_from_api_key,
    credentials_from_header,
)
from hub_server.core.errors import RateLimited, Unauthorized
from hub_server.http.state import Hub

PRINCIPAL_KEY = "hub.principal"
# Set on a small twine upload whose authentication is left to its route (see http.limits).
AUTH_DEFERRED_KEY = "hub.auth_deferred"


def client_ip(request: Request) -> str:
    return request.client.host if request.client else "unknown"


def resolve_principal(request: Request, hub: Hub, session: Session) -> Principal | None:
    """The caller behind the Authorization header (or the Tinker SDK's `X-API-Key`); None
    when anonymous.

    A wrong token is a 401 (never silently anonymous), and failed attempts are rate limited
    per client IP so tokens cannot be guessed at speed. A principal the request-limits
    middleware already resolved is reused.
    """
    if PRINCIPAL_KEY in request.scope:
        cached: Principal | None = request.scope[PRINCIPAL_KEY]
        return cached
    token = credentials_from_header(request.headers.get("authorization"))
    if token is None:
        token = credentials_from_api_key(request.headers.get("x-api-key"))
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
