"""Signing in through the hub's web form, as a browser does: read the page's CSRF value, post it
with a token. Shared by the tests of the forms and of the pages behind them."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient


def csrf_of(html: str) -> str:
    """The CSRF value of the page's form."""
    match = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert match, "the page has no CSRF field"
    return match.group(1)


def sign_in(client: TestClient, token: str, next_page: str | None = None) -> None:
    """Sign in afresh (cookies cleared); the hub redirects, to `next_page` when one is given."""
    client.cookies.clear()
    form = client.get("/login")
    data = {"csrf_token": csrf_of(form.text), "token": token}
    if next_page is not None:
        data["next"] = next_page
    answer = client.post("/login", data=data, follow_redirects=False)
    assert answer.status_code == 303, answer.text
    if next_page is not None:
        assert answer.headers["location"] == next_page
