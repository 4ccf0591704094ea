"""`prime hub user|org|token …`: work without a server, print the token last, refuse bad input."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
from sqlmodel import Session, select

from hub_server.accounts.admin import open_database
from hub_server.accounts.models import ApiToken
from tests.hub_server.hubproc import HubProcess

PRIME = str(Path(sys.executable).with_name("prime"))


def prime(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PRIME, *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, **(env or {})},
    )


def test_admin_commands_bootstrap_a_hub_offline(tmp_path: Path) -> None:
    data = str(tmp_path / "hub")
    created = prime("hub", "user", "add", "alice", "--admin", "--data-dir", data)
    assert created.returncode == 0, created.stderr
    token = created.stdout.strip().splitlines()[-1]
    assert token.startswith("phub_") and len(token) > 40
    assert prime("hub", "user", "add", "bob", "--data-dir", data).returncode == 0
    org = prime("hub", "org", "add", "acme", "--member", "alice", "--data-dir", data)
    assert org.returncode == 0, org.stderr
    assert prime("hub", "org", "add-member", "acme", "bob", "--data-dir", data).returncode == 0
    scoped = prime(
        "hub", "token", "create", "bob", "--scope", "upload:acme/wordle", "--data-dir", data
    )
    assert scoped.returncode == 0 and "upload:acme/wordle" in scoped.stdout
    bob_token = scoped.stdout.strip().splitlines()[-1]
    assert bob_token.startswith("phub_") and bob_token != token
    assert bob_token not in (tmp_path / "hub" / "hub.sqlite3").read_bytes().decode("latin-1")

    hub = HubProcess(
        url="", data_dir=tmp_path / "hub", env={}, port=0, log_path=tmp_path / "server.log"
    )
    from tests.support import free_port

    hub.port = free_port()
    hub.url = f"http://127.0.0.1:{hub.port}"
    hub.start()
    try:
        me = httpx.get(
            f"{hub.url}/api/v1/user/whoami", headers={"Authorization": f"Bearer {bob_token}"}
        )
        assert me.json()["data"]["organizations"] == ["acme"]
        revoked = prime("hub", "token", "revoke", bob_token, "--data-dir", data)
        assert revoked.returncode == 0
        after = httpx.get(
            f"{hub.url}/api/v1/user/whoami", headers={"Authorization": f"Bearer {bob_token}"}
        )
        assert after.status_code == 401
    finally:
        hub.stop()


def test_admin_commands_refuse_bad_input(tmp_path: Path) -> None:
    data = str(tmp_path / "hub")
    assert prime("hub", "user", "add", "carol", "--data-dir", data).returncode == 0
    cases = [
        (("hub", "user", "add", "carol"), "already taken"),
        (("hub", "user", "add", "Bad Name!"), "not a valid"),
        (("hub", "org", "add", "carol"), "already taken"),
        (("hub", "org", "add", "team", "--member", "nobody"), "No user named 'nobody'"),
        (("hub", "token", "create", "nobody"), "No user named"),
        (("hub", "token", "create", "carol", "--scope", "write-everything"), "Unknown scope"),
        (("hub", "token", "revoke", "phub_not-a-token"), "No such token"),
    ]
    for args, message in cases:
        result = prime(*args, "--data-dir", data)
        assert result.returncode != 0, args
        assert message in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr
    assert prime("hub", "org", "add", "team", "--data-dir", data).returncode == 0
    bad_setting = prime(
        "hub", "serve", "--data-dir", data, env={"PRIME_HUB_MAX_UPLOAD_BYTES": "lots"}
    )
    assert bad_setting.returncode != 0
    assert "Invalid PRIME_HUB_* setting: max_upload_bytes" in bad_setting.stderr


def test_seed_publishes_the_builtins_once_and_revokes_its_token(fresh_hub: HubProcess) -> None:
    args = ("hub", "seed", "--url", fresh_hub.url, "--data-dir", str(fresh_hub.data_dir))
    first = prime(*args, env=fresh_hub.env)
    assert first.returncode == 0, first.stderr
    listing = httpx.get(f"{fresh_hub.url}/api/v1/environmentshub/", params={"owner": "prime"})
    names = {env["name"] for env in listing.json()["data"]}
    assert {"wordle", "wiki-search", "reverse-text", "arithmetic", "python-code"} <= names
    # Only the environments: the SDK they depend on is served by every hub itself (/_sdk/).
    assert not any(name.startswith("prime-envhub") for name in names)
    assert httpx.get(f"{fresh_hub.url}/_sdk/simple/prime-envhub-sdk/").status_code == 200
    again = prime(*args, env=fresh_hub.env)
    assert again.returncode == 0, again.stderr
    assert "0 new file(s)" in again.stdout
    engine = open_database(fresh_hub.settings)
    try:
        with Session(engine) as session:
            seed_tokens = session.exec(select(ApiToken).where(ApiToken.name == "seed")).all()
    finally:
        engine.dispose()
    assert len(seed_tokens) == 2 and all(t.revoked_at is not None for t in seed_tokens)
