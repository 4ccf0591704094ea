"""Security headers on every response: a Content-Security-Policy, framing refused, no MIME
sniffing, no referrer leaving the site.

The hub's pages load their script and styles from `/static/` and carry no inline script or
style, so the policy allows only the hub itself (`'self'`); README images may come from any
HTTPS host (as on PyPI). `/docs` and `/redoc` (the API's Swagger and ReDoc pages, served
offline) start with an inline script, so those two alone may run inline scripts; they show
only the hub's own OpenAPI document. A pure ASGI middleware, so the refusals that other
middleware answers before any route (413, 401) carry the headers too.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: https:; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
_DOCS_POLICY = _POLICY.replace("script-src 'self'", "script-src 'self' 'unsafe-inline'").replace(
    "style-src 'self'", "style-src 'self' 'unsafe-inline'"
)
_DOCS_PATHS = ("/docs", "/redoc")


def _headers(path: str) -> list[tuple[bytes, bytes]]:
    policy = _DOCS_POLICY if path.rstrip("/") in _DOCS_PATHS else _POLICY
    return [
        (b"content-security-policy", policy.encode()),
        (b"x-frame-options", b"DENY"),
        (b"x-content-type-options", b"nosniff"),
        (b"referrer-policy", b"same-origin"),
    ]


class SecurityHeadersMiddleware:
    """Adds the headers above to every HTTP response (a route's own value of one wins)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        extra = _headers(scope.get("path", ""))

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _ in message.get("headers", [])}
                headers = list(message.get("headers", []))
                headers.extend((name, value) for name, value in extra if name not in present)
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)
