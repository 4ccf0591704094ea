"""Browser sign-in on the hub (in-process): a signed session cookie naming a token, CSRF on every
form, sign-out, the tokens page, and private environments shown only to those allowed."""

from __future__ import annotations

import re
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
    settings = HubSettings(data_dir=Path(tmp_path_factory.mktemp("signin")))
    engine = open_database(settings)
    create_user(engine, "alice")
    create_user(engine, "bob")
    tokens = {
        "alice": create_token(engine, "alice", "cli")[0],
        "alice-read": create_token(engine, "alice", "ro", ["read"])[0],
        "bob": create_token(engine, "bob", "cli")[0],
    }
    engine.dispose()
    with TestClient(create_app(settings)) as client:
        fields, files = twine_upload_form(
            "hidden-env",
            "1.0.0",
            wheel_bytes("hidden-env", "1.0.0", extra_metadata=("Keywords: Game,multi-turn",)),
        )
        response = client.post(
            "/alice/legacy/", auth=("__token__", tokens["alice"]), data=fields, files=files
        )
        assert response.status_code == 200, response.text
        response = client.patch(
            "/api/v1/environmentshub/alice/hidden-env",
            headers={"Authorization": f"Bearer {tokens['alice']}"},
            json={"visibility": "private"},
        )
        assert response.status_code == 200, response.text
        assert sorted(response.json()["data"]["tags"]) == ["game", "multi-turn"]
        yield client, tokens


def _sign_in(client: TestClient, token: str) -> None:
    """Sign in from the private environment's page: the form sends the browser back there."""
    sign_in(client, token, next_page="/alice/hidden-env")


def test_signed_in_owner_sees_private_environment_and_others_do_not(
    hub: tuple[TestClient, dict[str, str]],
) -> None:
    client, tokens = hub
    client.cookies.clear()
    assert client.get("/alice/hidden-env").status_code == 404
    _sign_in(client, tokens["bob"])
    assert client.get("/alice/hidden-env").status_code == 404
    _sign_in(client, tokens["alice"])
    page = client.get("/alice/hidden-env")
    assert page.status_code == 200 and "hidden-env" in page.text
    assert "Sign out" in page.text and 'href="/settings/tokens"' in page.text
    # The cookie never carries the secret, and it authenticates pages only, never the API.
    session_cookie = client.cookies.get("hub_session") or ""
    assert tokens["alice"] not in session_cookie
    api = client.get("/api/v1/environmentshub/alice/hidden-env/@latest")
    assert api.status_code == 404


def test_forms_refuse_a_missing_or_forged_csrf_value(
    hub: tuple[TestClient, dict[str, str]],
) -> None:
    client, tokens = hub
    client.cookies.clear()
    client.get("/login")
    refused = client.post("/login", data={"csrf_token": "forged", "token": tokens["alice"]})
    assert refused.status_code == 403 and "reload the page" in refused.text
    assert "hub_session" not in client.cookies
    _sign_in(client, tokens["alice"])
    assert client.post("/logout", data={}, follow_redirects=False).status_code == 403
    assert client.get("/alice/hidden-env").status_code == 200  # still signed in


def test_wrong_token_is_a_clear_error(hub: tuple[TestClient, dict[str, str]]) -> None:
    client, _ = hub
    client.cookies.clear()
    form = client.get("/login")
    response = client.post("/login", data={"csrf_token": csrf_of(form.text), "token": "phub_nope"})
    assert response.status_code == 401 and "not valid or was revoked" in response.text


def test_sign_out_ends_the_session(hub: tuple[TestClient, dict[str, str]]) -> None:
    client, tokens = hub
    _sign_in(client, tokens["alice"])
    page = client.get("/")
    response = client.post(
        "/logout", data={"csrf_token": csrf_of(page.text)}, follow_redirects=False
    )
    assert response.status_code == 303
    assert client.get("/alice/hidden-env").status_code == 404


def test_open_redirects_are_refused(hub: tuple[TestClient, dict[str, str]]) -> None:
    client, tokens = hub
    client.cookies.clear()
    form = client.get("/login")
    response = client.post(
        "/login",
        data={"csrf_token": csrf_of(form.text), "token": tokens["bob"], "next": "//evil.example/"},
        follow_redirects=False,
    )
    assert response.status_code == 303 and response.headers["location"] == "/"


def test_tokens_page_creates_lists_without_secret_and_revokes(
    hub: tuple[TestClient, dict[str, str]],
) -> None:
    client, tokens = hub
    client.cookies.clear()
    assert client.get("/settings/tokens", follow_redirects=False).status_code == 303
    _sign_in(client, tokens["alice"])
    page = client.get("/settings/tokens")
    assert page.status_code == 200
    assert tokens["alice"] not in page.text and "cli" in page.text
    created = client.post(
        "/settings/tokens",
        data={"csrf_token": csrf_of(page.text), "name": "laptop", "scope": "read"},
    )
    assert created.status_code == 201
    secret = re.search(r'<code id="new-token">(phub_[^<]+)</code>', created.text)
    assert secret, created.text
    new_token = secret.group(1)
    listed = client.get("/settings/tokens")
    assert "laptop" in listed.text and new_token not in listed.text
    # The new read token works on the API and can sign in.
    read = client.get(
        "/api/v1/environmentshub/alice/hidden-env/@latest",
        headers={"Authorization": f"Bearer {new_token}"},
    )
    assert read.status_code == 200
    bad = client.post(
        "/settings/tokens",
        data={"csrf_token": csrf_of(listed.text), "name": "x", "scope": "root"},
    )
    assert bad.status_code == 400 and "Unknown scope" in bad.text
    # Revoke it: its next API call is refused at once.
    token_id = re.findall(r"/settings/tokens/([0-9a-f]{32})/revoke", listed.text)
    assert token_id
    for candidate in token_id:
        row_html = listed.text.split(f"/settings/tokens/{candidate}/revoke")[0].rsplit("<tr", 1)[-1]
        if "laptop" in row_html:
            revoked = client.post(
                f"/settings/tokens/{candidate}/revoke",
                data={"csrf_token": csrf_of(listed.text)},
                follow_redirects=False,
            )
            assert revoked.status_code == 303
    refused = client.get(
        "/api/v1/environmentshub/alice/hidden-env/@latest",
        headers={"Authorization": f"Bearer {new_token}"},
    )
    assert refused.status_code == 401


def test_narrow_token_session_cannot_mint_tokens_and_revoked_session_ends(
    hub: tuple[TestClient, dict[str, str]],
) -> None:
    client, tokens = hub
    _sign_in(client, tokens["alice-read"])
    page = client.get("/settings/tokens")
    assert "scope <code>all</code> to create tokens" in page.text
    refused = client.post(
        "/settings/tokens", data={"csrf_token": csrf_of(page.text), "name": "x", "scope": "all"}
    )
    assert refused.status_code == 403 and "to create tokens" in refused.text
    assert client.get("/alice/hidden-env").status_code == 200
    # Revoking the session's own token signs the browser out.
    ids = re.findall(r"/settings/tokens/([0-9a-f]{32})/revoke", page.text)
    current = [
        i
        for i in ids
        if "this session" in page.text.split(f"/settings/tokens/{i}/revoke")[0].rsplit("<tr", 1)[-1]
    ]
    assert len(current) == 1
    client.post(
        f"/settings/tokens/{current[0]}/revoke",
        data={"csrf_token": csrf_of(page.text)},
        follow_redirects=False,
    )
    assert client.get("/alice/hidden-env").status_code == 404


@pytest.mark.parametrize("scope", ["read", "upload:alice"])
def test_a_narrow_session_cannot_revoke_another_token(
    hub: tuple[TestClient, dict[str, str]], scope: str
) -> None:
    """Issue 26, class 3: a `read` token signed in on the web revoked the user's `all` token.
    The form now takes the API's scope rule: revoking another token needs `all`."""
    client, _tokens = hub
    engine = open_database(HubSettings(data_dir=Path(client.app.state.hub.settings.data_dir)))
    narrow, _ = create_token(engine, "alice", f"narrow-{scope}", [scope])
    strong, row = create_token(engine, "alice", f"strong-{scope}")
    strong_id = row.id
    engine.dispose()
    _sign_in(client, narrow)
    page = client.get("/settings/tokens")
    assert f"/settings/tokens/{strong_id}/revoke" not in page.text  # no button for it
    refused = client.post(
        f"/settings/tokens/{strong_id}/revoke",
        data={"csrf_token": csrf_of(page.text)},
        follow_redirects=False,
    )
    assert refused.status_code == 403 and "revoke other tokens" in refused.text
    still = client.get("/api/v1/user/whoami", headers={"Authorization": f"Bearer {strong}"})
    assert still.status_code == 200, still.text
