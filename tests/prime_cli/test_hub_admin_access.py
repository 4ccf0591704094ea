"""`prime hub user|org|token`: access can be taken away, at once, on every route.

The admin commands (`prime hub user disable|delete`, `org remove-member`, `token list|revoke
--id`) run through click on the hub's data directory while the in-process app keeps serving.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from prime_cli.hub import hub as hub_cli
from tests.hub_server.hardening_hub import HardenedHub


@pytest.fixture
def hub(tmp_path: Path) -> HardenedHub:
    return HardenedHub(tmp_path / "hub")


@pytest.fixture
def client(hub: HardenedHub) -> Iterator[TestClient]:
    with hub.client() as client:
        yield client


def admin(hub: HardenedHub, *args: str) -> str:
    result = CliRunner().invoke(hub_cli, [*args, "--data-dir", str(hub.settings.data_dir)])
    assert result.exit_code == 0, result.output
    return result.output


def routes_ok(client: TestClient, token: str) -> dict[str, int]:
    """The answer on an API route, a private environment, its simple index and a write."""
    bearer = {"Authorization": f"Bearer {token}"}
    return {
        "whoami": client.get("/api/v1/user/whoami", headers=bearer).status_code,
        "private env": client.get(
            "/api/v1/environmentshub/acme/secret", headers=bearer
        ).status_code,
        "simple index": client.get("/acme/simple/secret/", headers=bearer).status_code,
        "resolve": client.post(
            "/api/v1/environmentshub/resolve", headers=bearer, json={"name": "new-env"}
        ).status_code,
    }


def test_disable_and_enable_a_user(hub: HardenedHub, client: TestClient) -> None:
    token = hub.tokens["alice"]
    before = routes_ok(client, token)
    assert before == {"whoami": 200, "private env": 200, "simple index": 200, "resolve": 200}
    admin(hub, "user", "disable", "alice")
    assert set(routes_ok(client, token).values()) == {401}
    admin(hub, "user", "disable", "alice", "--enable")
    assert routes_ok(client, token)["whoami"] == 200


def test_delete_a_user(hub: HardenedHub, client: TestClient) -> None:
    token = hub.tokens["alice"]
    assert routes_ok(client, token)["whoami"] == 200
    admin(hub, "user", "delete", "alice", "--yes")
    assert set(routes_ok(client, token).values()) == {401}
    listing = admin(hub, "token", "list", "alice")
    assert "revoked" in listing
    result = CliRunner().invoke(
        hub_cli, ["token", "create", "alice", "--data-dir", str(hub.settings.data_dir)]
    )
    assert result.exit_code != 0 and "deleted" in result.output


def test_remove_an_org_member(hub: HardenedHub, client: TestClient) -> None:
    token = hub.tokens["alice"]
    assert routes_ok(client, token)["simple index"] == 200
    admin(hub, "org", "remove-member", "acme", "alice")
    after = routes_ok(client, token)
    assert after["private env"] == 404 and after["simple index"] == 404
    assert after["whoami"] == 200  # still a user, just not of acme


def test_list_and_revoke_tokens_by_id(hub: HardenedHub, client: TestClient) -> None:
    token = hub.tokens["bob"]
    assert routes_ok(client, token)["whoami"] == 200  # marks it used
    listing = admin(hub, "token", "list", "bob")
    assert token not in listing
    lines = [line.split("\t") for line in listing.strip().splitlines()[1:]]
    assert len(lines) == 1
    token_id, _name, scopes, _created, last_used, revoked = lines[0]
    assert scopes == "all" and last_used != "-" and revoked == "-"
    admin(hub, "token", "revoke", "--id", token_id)
    assert routes_ok(client, token)["whoami"] == 401
    assert admin(hub, "token", "list", "bob").strip().splitlines()[1].split("\t")[5] != "-"
