"""Rendering a page: the one Jinja2 environment, the CSRF field every form carries, and the
cookie that goes with a freshly minted CSRF value."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from markupsafe import Markup, escape

from hub_server.http.state import Hub
from hub_server.web.render import build_templates
from hub_server.web.session import CSRF_FIELD, csrf_value, remember_csrf

templates = build_templates()


def _csrf_field(request: Request) -> Markup:
    hub: Hub = request.app.state.hub
    value = escape(csrf_value(request, hub))
    return Markup(f'<input type="hidden" name="{CSRF_FIELD}" value="{value}">')


templates.env.globals["csrf_field"] = _csrf_field


def page(request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    """Render `template`; set the CSRF cookie when the page minted one for its forms."""
    response = templates.TemplateResponse(request, template, context, status_code=status_code)
    remember_csrf(request, response, request.app.state.hub)
    response.headers.setdefault("Cache-Control", "private, no-cache")
    return response


def not_found_page(request: Request, message: str) -> HTMLResponse:
    """The 404 page, saying what was not found."""
    return page(request, "not_found.html", status_code=404, message=message)
