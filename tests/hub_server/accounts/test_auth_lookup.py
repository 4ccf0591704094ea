"""Authentication is one statement per request: the token, its user and the owners it acts
for, with the memberships probed once (not once per owner of the hub)."""

from __future__ import annotations

from pathlib import Path

from sqlmodel import Session

from hub_server.accounts.auth import _BY_HASH, authenticate
from hub_server.admin import create_org, create_token, create_user, open_database
from hub_server.core.settings import HubSettings


def test_a_token_brings_its_user_and_every_owner_it_acts_for(tmp_path: Path) -> None:
    engine = open_database(HubSettings(data_dir=tmp_path))
    for name in ("ana", "bo"):
        create_user(engine, name)
    create_org(engine, "guild", ["ana"])
    create_org(engine, "other", ["bo"])
    token, _ = create_token(engine, "ana", "t")
    with Session(engine, expire_on_commit=False) as session:
        principal = authenticate(session, token)
        assert authenticate(session, token + "x") is None
    assert principal is not None and principal.user.username == "ana"
    assert sorted(principal.owners) == ["ana", "guild"]
    assert principal.owner_ids == {owner.id for owner in principal.owners.values()}


def test_the_memberships_are_probed_once_not_per_owner(tmp_path: Path) -> None:
    plan = _token_lookup_plan(tmp_path)
    assert "ix_apitoken_token_hash" in plan and "CORRELATED" not in plan, plan


def test_the_callers_own_owner_is_an_index_probe_not_a_scan(tmp_path: Path) -> None:
    plan = _token_lookup_plan(tmp_path)
    assert "SCAN owner" not in plan and "ix_owner_user_id" in plan, plan


def _token_lookup_plan(tmp_path: Path) -> str:
    """SQLite's query plan for authentication's one statement, on a migrated database."""
    engine = open_database(HubSettings(data_dir=tmp_path))
    statement = _BY_HASH.params(digest="x")
    sql = str(statement.compile(engine, compile_kwargs={"literal_binds": True}))
    with engine.connect() as connection:
        return " ".join(str(row) for row in connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}"))
