"""The verification queue is fair (issue 37): accounts in turn, one run under way per account,
an hourly budget each, a bounded queue per account, and a waiting run says where it stands.
On SQLite and on a throwaway PostgreSQL cluster (where two workers' claims really race).
First in, first out (before) claimed one account's 20 queued runs before another's one."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from sqlmodel import Session, SQLModel, select

from hub_server.accounts.models import User
from hub_server.core.ids import utcnow
from hub_server.evals import verification
from hub_server.evals.models import Evaluation, EvaluationStatus, VerificationStatus
from hub_server.evals.verification import claim_next
from hub_server.evals.verification_queue import position, snapshot
from hub_server.registry.models import DistFile, Version
from registry_index.schemas.versions import FileKind
from tests.hub_server.hardening_hub import HardenedHub
from tests.hub_server.services import postgres_bin, postgres_cluster
from tests.support import require

EVALS = "/api/v1/evaluations"


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def database(request: pytest.FixtureRequest) -> Iterator[str | None]:
    """A database URL (None: the hub's own SQLite file)."""
    if request.param == "sqlite":
        yield None
        return
    require(postgres_bin() is not None, "PostgreSQL (Debian package postgresql)")
    with postgres_cluster() as url:
        yield url


async def _no_worker(*_args: object) -> None:
    """The hub's worker is not started: these tests play it with `claim_next`."""


@pytest.fixture
def hub(
    database: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[HardenedHub]:
    monkeypatch.setattr(verification, "run_worker", _no_worker)
    settings: dict[str, object] = {"verify_sandbox": "docker", "verify_timeout_seconds": 60.0}
    if database is not None:
        settings["database_url"] = database
    made = HardenedHub(tmp_path, **settings)
    try:
        yield made
    finally:
        if database is not None:  # the next test's hub starts on an empty database
            SQLModel.metadata.drop_all(made.engine)
            with made.engine.begin() as connection:
                connection.exec_driver_sql("DROP TABLE IF EXISTS alembic_version")
        made.engine.dispose()


def queue_runs(
    hub: HardenedHub, user: str, env: str, count: int, *, at: datetime | None = None,
    status: VerificationStatus = VerificationStatus.PENDING,
) -> list[str]:  # fmt: skip
    """`count` finalized runs of `user` on `env` waiting for verification, a second apart."""
    start = at or utcnow()
    ids = []
    with Session(hub.engine) as session:
        account = session.exec(select(User).where(User.username == user)).one()
        version = session.exec(
            select(Version).where(Version.environment_id == hub.env_ids[env])
        ).one()
        for i in range(count):
            run = Evaluation(name=f"{user}-{i}", environment_id=version.environment_id,
                             version_id=version.id, env_version=version.version,
                             user_id=account.id, model_name="m", is_public=True,
                             status=EvaluationStatus.COMPLETED,
                             finalized_at=start + timedelta(seconds=i), verification=status)  # fmt: skip
            session.add(run)
            session.flush()
            ids.append(run.id)
        session.commit()
    return ids


def finish(hub: HardenedHub, run_id: str, seconds: float = 1.0) -> None:
    """What the worker records when it is done with a run that took `seconds`."""
    with Session(hub.engine) as session:
        run = session.get(Evaluation, run_id)
        assert run is not None and run.verification == VerificationStatus.RUNNING
        run.verification = VerificationStatus.VERIFIED
        assert run.verification_started_at is not None
        run.verified_at = run.verification_started_at + timedelta(seconds=seconds)
        session.add(run)
        session.commit()


def test_another_account_waits_for_at_most_one_run_of_an_account_with_twenty_queued(
    hub: HardenedHub,
) -> None:
    flood = queue_runs(hub, "alice", "alice/wordle", 20)
    (honest,) = queue_runs(hub, "bob", "alice/wordle", 1, at=utcnow() + timedelta(minutes=1))
    settings = hub.settings
    # One worker: alice's oldest run first (both accounts unserved, hers waited longest) ...
    assert claim_next(hub.engine, settings) == flood[0]
    with Session(hub.engine) as session:
        place = position(session, settings, honest)
        assert place is not None and place.position == 1, place
        assert position(session, settings, flood[1]) is not None
    # ... while it runs, a second worker takes bob's, never alice's second.
    assert claim_next(hub.engine, settings) == honest
    assert claim_next(hub.engine, settings) is None  # each account has one under way
    finish(hub, flood[0])
    finish(hub, honest)
    assert claim_next(hub.engine, settings) == flood[1]


def test_with_one_worker_accounts_take_turns_and_an_account_s_environments_too(
    hub: HardenedHub,
) -> None:
    alice = queue_runs(hub, "alice", "alice/wordle", 3)
    other = queue_runs(hub, "alice", "alice/other", 1, at=utcnow() + timedelta(seconds=30))
    bob = queue_runs(hub, "bob", "alice/wordle", 2, at=utcnow() + timedelta(minutes=1))
    order = []
    for _ in range(6):
        run = claim_next(hub.engine, hub.settings)
        assert run is not None
        order.append(run)
        finish(hub, run)
    assert order == [alice[0], bob[0], other[0], bob[1], alice[1], alice[2]]
    assert claim_next(hub.engine, hub.settings) is None


def test_concurrent_workers_never_run_two_of_one_account(hub: HardenedHub) -> None:
    queue_runs(hub, "alice", "alice/wordle", 8)
    with ThreadPoolExecutor(8) as pool:
        claimed = list(pool.map(lambda _: claim_next(hub.engine, hub.settings), range(8)))
    assert len([run for run in claimed if run is not None]) == 1, claimed


def test_an_account_past_its_hourly_budget_waits_and_is_told_until_when(
    hub: HardenedHub,
) -> None:
    settings = hub.settings.model_copy(update={"verify_account_seconds_per_hour": 100.0})
    done = queue_runs(hub, "alice", "alice/wordle", 2)
    for run in done:  # 2 x 60 s of verification in the last hour: past 100 s
        assert claim_next(hub.engine, settings) == run
        with Session(hub.engine) as session:
            row = session.get(Evaluation, run)
            assert row is not None
            row.verification_started_at = utcnow() - timedelta(minutes=30)
            session.add(row)
            session.commit()
        finish(hub, run, seconds=60)
    (waiting,) = queue_runs(hub, "alice", "alice/wordle", 1)
    (bobs,) = queue_runs(hub, "bob", "alice/wordle", 1, at=utcnow() + timedelta(minutes=1))
    assert claim_next(hub.engine, settings) == bobs
    assert claim_next(hub.engine, settings) is None
    with hub.client() as client:
        # The API computes the queue with the hub's own settings; give it the same budget.
        hub.app.state.hub.settings = settings
        state = client.get(f"{EVALS}/{waiting}",
                           headers={"Authorization": f"Bearer {hub.tokens['alice']}"}).json()  # fmt: skip
    data = state["data"]
    assert data["verification"] == "pending" and data["verification_position"] is None
    assert "100 s of verification in the last hour" in data["verification_detail"], data
    # 120 s used, budget 100: once the first run's first 20 s leave the window (30 min and
    # 20 s from now) alice is served again.
    later = utcnow() + timedelta(minutes=31)
    with Session(hub.engine) as session:
        assert waiting in [run.id for run in snapshot(session, settings, later).order]


def test_a_waiting_run_says_where_it_stands_and_a_full_queue_skips(hub: HardenedHub) -> None:
    settings = hub.settings.model_copy(update={"verify_max_pending_per_account": 2})
    hub.app.state.hub.settings = settings
    with Session(hub.engine) as session:  # the version needs a wheel to be verifiable
        version = session.exec(
            select(Version).where(Version.environment_id == hub.env_ids["alice/wordle"])
        ).one()
        session.add(DistFile(environment_id=version.environment_id, version_id=version.id,
                             filename="wordle-0.1.0-py3-none-any.whl",
                             kind=FileKind.WHEEL, size=1, sha256="0" * 64, blob_key="x"))  # fmt: skip
        session.commit()
    states = []
    with hub.client() as client:
        for user in ("alice", "alice", "bob", "alice"):
            token = {"Authorization": f"Bearer {hub.tokens[user]}"}
            run = client.post(f"{EVALS}/", headers=token, json={
                "name": user, "environments": [{"slug": "alice/wordle"}], "model_name": "m",
                "is_public": True}).json()["data"]["id"]  # fmt: skip
            assert client.post(f"{EVALS}/{run}/samples", headers=token, json={"samples": [
                {"example_index": 0, "rollout_index": 0, "reward": 1.0}]}).status_code == 200  # fmt: skip
            done = client.post(f"{EVALS}/{run}/finalize", headers=token, json={})
            assert done.status_code == 200, done.text
            states.append(done.json()["data"])
        first, second, bobs, third = (
            client.get(f"{EVALS}/{s['id']}").json()["data"] for s in states
        )
    assert (first["verification"], first["verification_position"]) == ("pending", 1)
    assert first["verification_detail"] == "next in line for verification"
    assert (bobs["verification_position"], second["verification_position"]) == (2, 3)
    assert "2 runs ahead" in second["verification_detail"]
    assert third["verification"] == "skipped" and third["verification_position"] is None
    assert "already has 2 runs waiting" in third["verification_detail"]
