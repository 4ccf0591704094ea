"""Issue 9, item 4: eval results nobody can poison (in-process hub, real SQLite and blobs)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session, select

from hub_server.accounts.models import Owner
from hub_server.core.ids import utcnow
from hub_server.evals.models import Evaluation
from hub_server.evals.service import mark_abandoned
from hub_server.registry.models import Environment
from hub_server.registry.publishing import EnvTarget, NewFile, publish_file
from tests.hub_server.hardening_hub import HardenedHub
from tests.hub_server.races import after_first_select

EVALS = "/api/v1/evaluations"


@pytest.fixture
def hub(tmp_path: Path) -> HardenedHub:
    return HardenedHub(tmp_path)


@pytest.fixture
def client(hub: HardenedHub) -> Iterator[TestClient]:
    with hub.client() as client:
        yield client


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def create(client: TestClient, token: str, slug: str, **fields: Any) -> dict[str, Any]:
    body = {"name": "run", "environments": [{"slug": slug}], "model_name": "m", **fields}
    response = client.post(f"{EVALS}/", headers=auth(token), json=body)
    assert response.status_code == 200, response.text
    return dict(response.json()["data"])


def push(client: TestClient, token: str, run: str, samples: list[Any]) -> Any:
    return client.post(f"{EVALS}/{run}/samples", headers=auth(token), json={"samples": samples})


def rollouts(*rewards: float, start: int = 0) -> list[dict[str, Any]]:
    return [
        {"example_index": start + i, "rollout_index": 0, "reward": r} for i, r in enumerate(rewards)
    ]


def finalize(client: TestClient, token: str, run: str) -> Any:
    return client.post(f"{EVALS}/{run}/finalize", headers=auth(token), json={})


# -- scopes ----------------------------------------------------------------------------------


def test_read_token_never_writes(hub: HardenedHub, client: TestClient) -> None:
    run = create(client, hub.tokens["alice"], "alice/wordle")["id"]
    read = hub.token("alice", ["read"])
    assert push(client, read, run, rollouts(1.0)).status_code == 403
    assert finalize(client, read, run).status_code == 403
    assert client.post(f"{EVALS}/", headers=auth(read), json={
        "name": "r", "environments": [{"slug": "alice/wordle"}], "model_name": "m",
    }).status_code == 403  # fmt: skip
    count = client.get(f"{EVALS}/{run}", headers=auth(hub.tokens["alice"]))
    assert count.json()["data"]["sample_count"] == 0


def test_env_scoped_token_writes_and_reads_only_its_environment(
    hub: HardenedHub, client: TestClient
) -> None:
    elsewhere = create(client, hub.tokens["alice"], "alice/other")["id"]  # private run
    scoped = hub.token("alice", ["upload:alice/wordle"])
    own = create(client, scoped, "alice/wordle")["id"]
    assert push(client, scoped, own, rollouts(1.0)).status_code == 200
    # The other environment's private run: neither writable nor readable, on any route.
    assert push(client, scoped, elsewhere, rollouts(1.0)).status_code == 404
    assert finalize(client, scoped, elsewhere).status_code == 404
    assert client.get(f"{EVALS}/{elsewhere}", headers=auth(scoped)).status_code == 404
    assert client.get(f"{EVALS}/{elsewhere}/samples", headers=auth(scoped)).status_code == 404
    listed = client.get(f"{EVALS}/", headers=auth(scoped)).json()["data"]
    assert [row["id"] for row in listed] == [own]
    other_env = client.get(f"{EVALS}/", headers=auth(scoped), params={"env": "alice/other"})
    assert other_env.json()["data"] == []
    refused = client.post(
        f"{EVALS}/",
        headers=auth(scoped),
        json={"name": "r", "environments": [{"slug": "alice/other"}], "model_name": "m"},
    )
    assert refused.status_code == 403


# -- rewards ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        '{"example_index": 0, "reward": NaN}',
        '{"example_index": 0, "reward": Infinity}',
        '{"example_index": 0, "reward": -Infinity}',
        '{"example_index": 0, "reward": 1e400}',
        '{"example_index": 0, "reward": 1e308}',
        '{"example_index": 0, "reward": 1, "metrics": {"x": 1e300}}',
        '{"example_index": 0, "reward": 1, "rewards": {"x": NaN}}',
    ],
)
def test_non_finite_or_overflowing_scores_are_refused(
    hub: HardenedHub, client: TestClient, raw: str
) -> None:
    run = create(client, hub.tokens["alice"], "alice/wordle")["id"]
    response = client.post(
        f"{EVALS}/{run}/samples",
        headers={**auth(hub.tokens["alice"]), "content-type": "application/json"},
        content='{"samples": [' + raw + "]}",
    )
    assert response.status_code == 400, response.text
    count = client.get(f"{EVALS}/{run}", headers=auth(hub.tokens["alice"]))
    assert count.json()["data"]["sample_count"] == 0


def test_declared_reward_range_is_enforced(hub: HardenedHub, client: TestClient) -> None:
    with Session(hub.engine) as session:
        env = session.get(Environment, hub.env_ids["alice/wordle"])
        assert env is not None
        env.reward_min, env.reward_max = 0.0, 1.0
        session.add(env)
        session.commit()
    run = create(client, hub.tokens["alice"], "alice/wordle")["id"]
    refused = push(client, hub.tokens["alice"], run, rollouts(0.5, 1.5))
    assert refused.status_code == 400
    assert "samples[1].reward" in refused.json()["detail"]
    assert push(client, hub.tokens["alice"], run, rollouts(0.0, 1.0)).status_code == 200


def test_push_metadata_declares_the_reward_range(hub: HardenedHub, client: TestClient) -> None:
    env_id = hub.env_ids["alice/wordle"]
    response = client.post(
        f"/api/v1/environmentshub/{env_id}/versions",
        headers=auth(hub.tokens["alice"]),
        json={
            "filename": "wordle-0.2.0.tar.gz",
            "sha256": hashlib.sha256(b"x").hexdigest(),
            "semantic_version": "0.2.0",
            "metadata": {"reward_range": [0, 1]},
        },
    )
    assert response.status_code == 200, response.text
    run = create(client, hub.tokens["alice"], "alice/wordle")["id"]
    assert push(client, hub.tokens["alice"], run, rollouts(2.0)).status_code == 400


# -- provenance and the leaderboard ----------------------------------------------------------


def _finished(client: TestClient, token: str, slug: str, model: str, rewards: list[float]) -> str:
    run = create(client, token, slug, model_name=model, is_public=True)["id"]
    assert push(client, token, run, rollouts(*rewards)).status_code == 200
    assert finalize(client, token, run).status_code == 200
    return str(run)


def test_leaderboard_marks_third_party_ties_and_hidden_runs(
    hub: HardenedHub, client: TestClient
) -> None:
    board_url = "/api/v1/environmentshub/alice/wordle/leaderboard"
    strong = [1.0] * 50
    _finished(client, hub.tokens["alice"], "alice/wordle", "strong", strong)
    _finished(client, hub.tokens["alice"], "alice/wordle", "close", [1.0] * 48 + [0.0, 0.0])
    bobs = _finished(client, hub.tokens["bob"], "alice/wordle", "bobs", [0.0] * 50)
    rows = {row["model"]: row for row in client.get(board_url).json()["data"]}
    assert rows["strong"]["n"] == 50 and rows["close"]["n"] == 50
    assert rows["strong"]["rank"] == rows["close"]["rank"] == 1
    assert rows["strong"]["tied"] and rows["close"]["tied"]
    assert rows["close"]["ci_low"] < rows["close"]["ci_high"]
    assert rows["bobs"]["rank"] == 3 and not rows["bobs"]["tied"]
    assert rows["bobs"]["third_party"] and not rows["strong"]["third_party"]
    first_party = client.get(board_url, params={"third_party": "false"}).json()["data"]
    assert {row["model"] for row in first_party} == {"strong", "close"}
    # Bob cannot hide runs on alice's board; alice can.
    assert client.post(f"{EVALS}/{bobs}/hide", headers=auth(hub.tokens["bob"])).status_code == 403
    hidden = client.post(f"{EVALS}/{bobs}/hide", headers=auth(hub.tokens["alice"]))
    assert hidden.status_code == 200 and hidden.json()["data"]["hidden"]
    assert "bobs" not in {row["model"] for row in client.get(board_url).json()["data"]}
    assert client.get(f"{EVALS}/{bobs}").json()["data"]["third_party"]


# -- idempotent pushes and abandoned runs ----------------------------------------------------


def test_create_with_a_client_run_id_resumes_the_same_run(
    hub: HardenedHub, client: TestClient
) -> None:
    token = hub.tokens["alice"]
    first = create(client, token, "alice/wordle", client_run_id="run-123")
    again = create(client, token, "alice/wordle", client_run_id="run-123")
    assert again["id"] == first["id"]
    by_header = client.post(
        f"{EVALS}/",
        headers={**auth(token), "Idempotency-Key": "run-123"},
        json={"name": "run", "environments": [{"slug": "alice/wordle"}], "model_name": "m"},
    )
    assert by_header.json()["evaluation_id"] == first["id"]
    # A retried batch (same bytes) is accepted once; the count does not double.
    batch = [{"example_index": 0, "reward": 1.0}, {"example_index": 0, "reward": 0.0}]
    assert push(client, token, first["id"], batch).status_code == 200
    assert push(client, token, first["id"], batch).status_code == 200
    count = client.get(f"{EVALS}/{first['id']}", headers=auth(token))
    assert count.json()["data"]["sample_count"] == 2
    # A whole push repeated after it finished (the answer to finalize was lost) succeeds
    # without changing the run; a run created without an id still refuses a second finalize.
    assert finalize(client, token, first["id"]).status_code == 200
    assert create(client, token, "alice/wordle", client_run_id="run-123")["id"] == first["id"]
    assert push(client, token, first["id"], batch).status_code == 200
    assert finalize(client, token, first["id"]).status_code == 200
    assert push(client, token, first["id"], rollouts(1.0, start=7)).status_code == 409
    plain = create(client, token, "alice/wordle")["id"]
    assert finalize(client, token, plain).status_code == 200
    assert finalize(client, token, plain).status_code == 409
    clash = client.post(
        f"{EVALS}/",
        headers=auth(token),
        json={
            "name": "run",
            "environments": [{"slug": "alice/other"}],
            "model_name": "m",
            "client_run_id": "run-123",
        },
    )
    assert clash.status_code == 409
    # Another user's id space is their own.
    bobs = create(client, hub.tokens["bob"], "alice/wordle", client_run_id="run-123")
    assert bobs["id"] != first["id"]


def test_abandoned_runs_are_marked_and_never_listed(hub: HardenedHub, client: TestClient) -> None:
    token = hub.tokens["alice"]
    stale = create(client, token, "alice/wordle", is_public=True)["id"]
    assert push(client, token, stale, rollouts(1.0)).status_code == 200
    with Session(hub.engine) as session:  # its last write was two hours ago
        run = session.get(Evaluation, stale)
        assert run is not None
        run.updated_at = utcnow() - timedelta(hours=2)
        session.add(run)
        session.commit()
    fresh = create(client, token, "alice/wordle", is_public=True)["id"]
    assert mark_abandoned(hub.engine, after_seconds=3600) == 1
    with Session(hub.engine) as session:
        run = session.get(Evaluation, stale)
        assert run is not None and run.status == "abandoned"
    listed = [row["id"] for row in client.get(f"{EVALS}/").json()["data"]]
    assert listed == [fresh]
    asked = client.get(f"{EVALS}/", params={"status": "abandoned"}).json()["data"]
    assert [row["id"] for row in asked] == [stale]
    assert push(client, token, stale, rollouts(1.0, start=5)).status_code == 409
    assert finalize(client, token, stale).status_code == 409


# -- same answer for missing and private; same lengths on every database --------------------


def test_resolve_answers_missing_like_private(hub: HardenedHub, client: TestClient) -> None:
    bob = auth(hub.tokens["bob"])
    answers = []
    for name in ("secret", "absent-env"):
        response = client.post(
            "/api/v1/environmentshub/resolve",
            headers=bob,
            json={"name": name, "owner_slug": "acme"},
        )
        answers.append((response.status_code, response.json()["detail"].replace(name, "NAME")))
    assert answers[0] == answers[1]
    assert answers[0][0] == 404


def test_overlong_tags_and_versions_are_a_400_everywhere(
    hub: HardenedHub, client: TestClient
) -> None:
    alice = auth(hub.tokens["alice"])
    resolve = client.post(
        "/api/v1/environmentshub/resolve",
        headers=alice,
        json={"name": "tagged", "tags": ["t" * 65]},
    )
    assert resolve.status_code == 400
    env_id = hub.env_ids["alice/wordle"]
    long_version = "1." + "1" * 70
    reserve = client.post(
        f"/api/v1/environmentshub/{env_id}/versions",
        headers=alice,
        json={
            "filename": "w.tar.gz",
            "sha256": "0" * 64,
            "semantic_version": long_version,
            "metadata": {"tags": ["t" * 65]},
        },
    )
    assert reserve.status_code == 400


def test_run_page_renders_samples_without_completion(hub: HardenedHub, client: TestClient) -> None:
    token = hub.tokens["alice"]
    run = create(client, token, "alice/wordle", is_public=True)["id"]
    bare = [
        {"example_index": 0, "rollout_index": 0, "reward": 1.0},
        {"example_index": 1, "rollout_index": 0, "reward": 0.0, "completion": None},
        {"example_index": 2, "rollout_index": 0, "reward": 0.5, "completion": "plain text"},
    ]
    assert push(client, token, run, bare).status_code == 200
    assert finalize(client, token, run).status_code == 200
    page = client.get(f"/alice/wordle/evals/{run}")
    assert page.status_code == 200, page.text[-2000:]


def test_identical_upload_committed_between_reads_is_not_a_400(hub: HardenedHub) -> None:
    """The interleaving that gave 2 in ~780 concurrent identical uploads a 400: the same file
    is committed by another upload right after this one first looks for it."""
    data = b"identical bytes"
    new = NewFile(
        filename="wordle-0.9.0.tar.gz",
        kind="sdist",
        sha256=hashlib.sha256(data).hexdigest(),
        size=len(data),
        version="0.9.0",
    )
    store = hub.app.state.hub.store
    with Session(hub.engine) as session:
        owner = session.exec(select(Owner).where(Owner.name == "alice")).one()
    target = EnvTarget(owner=owner, name="wordle", environment_id=hub.env_ids["alice/wordle"])
    user_id = owner.user_id or ""

    def other_upload_lands() -> None:
        publish_file(hub.engine, store, target, new, store.scratch_copy(data), user_id)

    with after_first_select(hub.engine, "distfile", other_upload_lands) as fired:
        result = publish_file(hub.engine, store, target, new, store.scratch_copy(data), user_id)
    assert fired and not result.created
