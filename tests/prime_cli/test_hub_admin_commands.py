"""`prime hub user|org|token …`: work without a server, print the token last, refuse bad input.

The commands run in-process (click's CliRunner) and the hub they bootstrap is checked in-process;
only `prime hub seed`, which publishes over HTTP, talks to a real server."""

from __future__ import annotations

import os
import subprocess
import sys
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from sqlmodel import Session, select

from hub_server.accounts.models import ApiToken
from hub_server.admin import open_database
from prime_cli.main import cli
from tests.hub_server.hubproc import HubProcess, start_hub
from tests.hub_server.inproc import start_inproc_hub

PRIME = str(Path(sys.executable).with_name("prime"))


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def fresh_hub(tmp_path: Path) -> Iterator[HubProcess]:
    """A real server of its own: `prime hub seed` publishes over HTTP."""
    with start_hub(tmp_path / "hub") as running:
        yield running


def prime(*args: str, env: dict[str, str] | None = None) -> Result:
    """`prime ARGS` run in this process by click's CliRunner (no interpreter start per call)."""
    result = CliRunner().invoke(cli, list(args), env=env, catch_exceptions=True)
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(result.exception))  # as a process would
    return Result(result.exit_code, result.stdout, stderr)


def prime_process(
    *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The installed `prime` script in a subprocess, for commands that must run against a socket."""
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

    with start_inproc_hub(tmp_path / "hub") as hub:
        bob = hub.client(bob_token)
        me = bob.get("/api/v1/user/whoami")
        assert me.json()["data"]["organizations"] == ["acme"]
        revoked = prime("hub", "token", "revoke", bob_token, "--data-dir", data)
        assert revoked.returncode == 0
        assert bob.get("/api/v1/user/whoami").status_code == 401


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
    lab_workers = prime("hub", "serve", "--lab", "--workers", "2", "--data-dir", data)
    assert lab_workers.returncode != 0 and "--workers 1" in lab_workers.stderr
    no_vllm = prime(
        "hub", "serve", "--lab", "--lab-engine", "vllm", "--data-dir", data,
        env={"PRIME_ENGINES_DIR": str(tmp_path / "no-engines"), "PATH": os.defpath},
    )  # fmt: skip
    assert no_vllm.returncode != 0
    assert "prime engine install vllm" in no_vllm.stderr and "Traceback" not in no_vllm.stderr


@pytest.mark.slow  # builds the SDK and five environments with uv, twice
@pytest.mark.parametrize("name", ["api", "simple", "legacy", "files", "login", "static", "docs"])
def test_names_of_the_hub_s_own_routes_are_reserved_for_users_and_orgs(
    tmp_path: Path, name: str
) -> None:
    """Issue 37: `prime hub user add api|simple|legacy|files` succeeded, a namespace whose
    paths (/api/…, /legacy/) are the hub's own. The reserved words are read off the routes."""
    data = str(tmp_path / "hub")
    for args in (("hub", "user", "add", name), ("hub", "org", "add", name)):
        result = prime(*args, "--data-dir", data)
        assert result.returncode != 0, (args, result.stdout)
        assert f"{name!r} is reserved: the hub's own routes use it" in result.stderr, result.stderr
        assert "Traceback" not in result.stderr
    assert prime("hub", "user", "add", f"{name}-fan", "--data-dir", data).returncode == 0


def test_every_literal_route_segment_is_reserved() -> None:
    """A route added later reserves its words too: the set is derived from the app's routes."""
    from fastapi.routing import APIRoute

    from hub_server.routes import ROUTERS, reserved_owner_names

    words = {
        segment
        for router in ROUTERS
        for route in router.routes
        if isinstance(route, APIRoute)
        for segment in route.path.split("/")
        if segment and "{" not in segment
    }
    assert {"api", "legacy", "simple", "files", "_sdk", "healthz", "openapi.json"} <= (
        reserved_owner_names()
    )
    assert words <= reserved_owner_names()


def test_seed_publishes_the_builtins_once_and_revokes_its_token(fresh_hub: HubProcess) -> None:
    args = ("hub", "seed", "--url", fresh_hub.url, "--data-dir", str(fresh_hub.data_dir))
    first = prime_process(*args, env=fresh_hub.env)
    assert first.returncode == 0, first.stderr
    for name in ("wordle", "arithmetic", "python-code"):  # each package as it goes
        assert f"{name}: building" in first.stderr and f"{name}: uploaded " in first.stderr
    listing = httpx.get(f"{fresh_hub.url}/api/v1/environmentshub/", params={"owner": "prime"})
    names = {env["name"] for env in listing.json()["data"]}
    assert {"wordle", "wiki-search", "reverse-text", "arithmetic", "python-code"} <= names
    # Only the environments: the SDK they depend on is served by every hub itself (/_sdk/).
    assert not any(name.startswith("prime-envhub") for name in names)
    assert httpx.get(f"{fresh_hub.url}/_sdk/simple/prime-envhub-sdk/").status_code == 200
    again = prime_process(*args, env=fresh_hub.env)
    assert again.returncode == 0, again.stderr
    assert "0 new file(s)" in again.stdout and "wordle: already on the hub" in again.stderr
    engine = open_database(fresh_hub.settings)
    try:
        with Session(engine) as session:
            seed_tokens = session.exec(select(ApiToken).where(ApiToken.name == "seed")).all()
    finally:
        engine.dispose()
    assert len(seed_tokens) == 2 and all(t.revoked_at is not None for t in seed_tokens)
