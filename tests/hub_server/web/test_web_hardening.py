"""Issue 26, class 12: every answer carries a Content-Security-Policy, refuses framing and
MIME sniffing; signing out ends the session on the server (a copied cookie stops working);
a form's CSRF value is bound to the session (a planted CSRF cookie does not help)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from hub_server.admin import create_token, create_user, open_database
from hub_server.app import create_app
from hub_server.core.settings import HubSettings
from tests.hub_server.web.signin import csrf_of, sign_in
from tests.hub_server.wheels import twine_upload_form, wheel_bytes


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, dict[str, str]]]:
    settings = HubSettings(data_dir=Path(tmp_path_factory.mktemp("hardening")),
                           max_anonymous_body_bytes=1024)  # fmt: skip
    engine = open_database(settings)
    tokens = {}
    for name in ("vic", "mal"):
        create_user(engine, name)
        tokens[name] = create_token(engine, name, "cli")[0]
    engine.dispose()
    with TestClient(create_app(settings)) as client:
        fields, files = twine_upload_form("secret-env", "1.0.0", wheel_bytes("secret-env", "1.0.0"))
        assert client.post("/vic/legacy/", auth=("__token__", tokens["vic"]), data=fields,
                           files=files).status_code == 200  # fmt: skip
        assert client.patch("/api/v1/environmentshub/vic/secret-env", json={"visibility": "private"},
                            headers={"Authorization": f"Bearer {tokens['vic']}"}).status_code == 200  # fmt: skip
        yield client, tokens


PATHS = ["/", "/login", "/vic", "/vic/secret-env", "/no/such-env", "/static/hub.css",
         "/vic/simple/", "/vic/files/secret-env/secret-env-1.0.0-py3-none-any.whl",
         "/api/v1/environmentshub/vic/secret-env", "/api/v1/evaluations/", "/docs", "/healthz",
         "/settings/tokens"]  # fmt: skip


@pytest.mark.parametrize("path", PATHS)
def test_every_answer_carries_the_security_headers(
    hub: tuple[TestClient, dict[str, str]], path: str
) -> None:
    client, _ = hub
    client.cookies.clear()
    answer = client.get(path, follow_redirects=False)
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["x-frame-options"] == "DENY"
    policy = answer.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in policy and "object-src 'none'" in policy
    if path != "/docs":
        assert "'unsafe-inline'" not in policy


def test_a_refusal_before_any_route_carries_them_too(
    hub: tuple[TestClient, dict[str, str]],
) -> None:
    client, _ = hub
    client.cookies.clear()
    refused = client.post("/api/v1/evaluations/", content=b"x" * 4096,
                          headers={"content-type": "application/json"})  # fmt: skip
    assert refused.status_code in (401, 413)
    assert refused.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in refused.headers["content-security-policy"]


def test_signing_out_ends_the_session_for_every_copy_of_the_cookie(
    hub: tuple[TestClient, dict[str, str]],
) -> None:
    client, tokens = hub
    sign_in(client, tokens["vic"])
    copied = dict(client.cookies)
    assert client.get("/vic/secret-env").status_code == 200
    page = client.get("/")
    out = client.post("/logout", data={"csrf_token": csrf_of(page.text)}, follow_redirects=False)
    assert out.status_code == 303
    client.cookies.clear()
    for name, value in copied.items():  # the stolen copy, replayed
        client.cookies.set(name, value)
    assert client.get("/vic/secret-env").status_code == 404
    assert client.get("/settings/tokens", follow_redirects=False).status_code == 303
    # A new sign-in is a new session; the old copy stays dead.
    sign_in(client, tokens["vic"])
    assert client.get("/vic/secret-env").status_code == 200


def test_the_csrf_value_is_bound_to_the_session(hub: tuple[TestClient, dict[str, str]]) -> None:
    client, tokens = hub
    # The attacker's own pair: a CSRF cookie and the value that matches it (a visit of theirs).
    client.cookies.clear()
    attacker_page = client.get("/login")
    attacker_cookie = client.cookies.get("hub_csrf")
    attacker_value = csrf_of(attacker_page.text)
    assert attacker_cookie
    sign_in(client, tokens["mal"])
    other_session_value = csrf_of(client.get("/settings/tokens").text)
    # The victim is signed in; the attacker plants their CSRF cookie in the victim's browser.
    sign_in(client, tokens["vic"])
    own_value = csrf_of(client.get("/settings/tokens").text)
    assert own_value not in (attacker_value, other_session_value)
    jar = {name: value for name, value in client.cookies.items() if name != "hub_csrf"}
    client.cookies.clear()
    for name, value in {**jar, "hub_csrf": attacker_cookie}.items():
        client.cookies.set(name, value)
    for forged in (attacker_value, other_session_value):
        answer = client.post("/settings/tokens", data={"csrf_token": forged, "name": "evil",
                                                       "scope": "all"})  # fmt: skip
        assert answer.status_code == 403, answer.text
    made = client.post(
        "/settings/tokens", data={"csrf_token": own_value, "name": "ok", "scope": "read"}
    )
    assert made.status_code == 201, made.text
