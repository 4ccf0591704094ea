"""Issue 26, classes 1 and 8: every score is a finite JSON number within the bound and every
index a JSON integer a column holds, whatever JSON type was sent; finalize never answers 500
after committing (in-process hub, real SQLite and blobs)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session

from hub_server.evals.models import Evaluation, EvaluationBatch
from hub_server.evals.samples import encode_batch
from hub_server.evals.service import batch_key
from tests.hub_server.hardening_hub import HardenedHub

EVALS = "/api/v1/evaluations"


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> HardenedHub:
    return HardenedHub(tmp_path_factory.mktemp("scores"))


@pytest.fixture(scope="module")
def client(hub: HardenedHub) -> Iterator[TestClient]:
    with hub.client() as client:
        yield client


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "content-type": "application/json"}


def new_run(client: TestClient, token: str) -> str:
    body = {"name": "r", "environments": [{"slug": "alice/wordle"}], "model_name": "m",
            "is_public": True}  # fmt: skip
    response = client.post(f"{EVALS}/", headers=auth(token), json=body)
    assert response.status_code == 200, response.text
    return str(response.json()["data"]["id"])


BIG = str(2**63)
# (sample JSON, the field the refusal must name)
REFUSED = [
    ('{"example_index": 0, "reward": 1, "rewards": {"x": "1.7e308"}}', "rewards.x"),
    ('{"example_index": 0, "reward": "0.5"}', "reward"),
    ('{"example_index": 0, "reward": true}', "reward"),
    ('{"example_index": 0, "reward": false, "rewards": {}}', "reward"),
    ('{"example_index": 0, "reward": 1, "metrics": {"len": true}}', "metrics.len"),
    ('{"example_index": 0, "reward": 1, "metrics": {"x": "NaN"}}', "metrics.x"),
    ('{"example_index": 0, "reward": 1, "metrics": {"x": "-Infinity"}}', "metrics.x"),
    ('{"example_index": 0, "reward": 1, "metrics": {"x": [1]}}', "metrics.x"),
    ('{"example_index": 0, "reward": 1, "rewards": {"x": {"v": 1}}}', "rewards.x"),
    ('{"example_index": 0, "reward": 100000000000000000000}', "reward"),
    ('{"example_index": 0, "reward": 1, "rewards": {"x": -1e16}}', "rewards.x"),
    ('{"example_index": 0, "reward": ' + "9" * 5000 + "}", "5000 digits"),
    ('{"example_index": 0, "reward": 1, "metrics": {"x": 1e999}}', "1e999"),
    ('{"example_index": 0, "reward": 1, "rewards": {"x": NaN}}', "NaN"),
    # class 8: indices and counts past what a column stores, or not integers at all
    ('{"example_index": ' + BIG + ', "reward": 1}', "example_index"),
    ('{"example_index": 2147483648, "reward": 1}', "example_index"),
    ('{"example_index": 0, "rollout_index": ' + str(2**64) + ', "reward": 1}', "rollout_index"),
    ('{"example_id": ' + BIG + ', "reward": 1}', "example_index"),
    ('{"example_index": "3", "reward": 1}', "example_index"),
    ('{"example_index": 1.5, "reward": 1}', "example_index"),
    ('{"example_index": 0, "reward": 1, "usage": {"prompt_tokens": ' + BIG + "}}", "usage.prompt_tokens"),
    ('{"example_index": 0, "reward": 1, "usage": {"completion_tokens": "7"}}', "usage.completion_tokens"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("raw", "field"), REFUSED, ids=[f"{i}-{f}" for i, (_, f) in enumerate(REFUSED)]
)
def test_a_score_or_index_that_is_not_a_bounded_json_number_is_a_400_naming_it(
    hub: HardenedHub, client: TestClient, raw: str, field: str
) -> None:
    token = hub.tokens["bob"]  # anyone may push to alice's public environment
    run = new_run(client, token)
    response = client.post(
        f"{EVALS}/{run}/samples", headers=auth(token), content='{"samples": [' + raw + "]}"
    )
    assert response.status_code == 400, response.text
    assert field in response.json()["detail"]
    finalized = client.post(f"{EVALS}/{run}/finalize", headers=auth(token), json={})
    assert finalized.status_code == 200, finalized.text
    assert finalized.json()["data"]["sample_count"] == 0
    for path in ("/alice/wordle", "/alice/wordle/v/0.1.0", f"/alice/wordle/evals/{run}",
                 f"{EVALS}/?env=alice/wordle", f"{EVALS}/{run}"):  # fmt: skip
        assert client.get(path).status_code == 200, path


def test_the_largest_accepted_scores_sum_to_a_finite_mean(
    hub: HardenedHub, client: TestClient
) -> None:
    token = hub.tokens["bob"]
    run = new_run(client, token)
    samples = [
        {"example_index": i, "rollout_index": 2**31 - 1, "reward": 1e15,
         "rewards": {"x": -1e15}, "metrics": {"n": 2**31 - 1}}
        for i in range(3)
    ]  # fmt: skip
    pushed = client.post(f"{EVALS}/{run}/samples", headers=auth(token), json={"samples": samples})
    assert pushed.status_code == 200, pushed.text
    finalized = client.post(f"{EVALS}/{run}/finalize", headers=auth(token), json={})
    assert finalized.status_code == 200, finalized.text
    assert finalized.json()["data"]["summary"]["reward_mean"] == 1e15
    for path in ("/alice/wordle", f"/alice/wordle/evals/{run}", f"{EVALS}/{run}/samples"):
        assert client.get(path).status_code == 200, path


def plant_batch(
    hub: HardenedHub, run: str, records: list[dict[str, Any]], partial: str | None
) -> None:
    """A batch as an older hub stored it, written straight to the blob store and the DB."""
    import hashlib

    blob = encode_batch(records)
    key = batch_key(hashlib.sha256(blob).hexdigest())
    hub.app.state.hub.store.put_bytes(blob, key)
    with Session(hub.engine) as session:
        keys = [[i, 0] for i in range(len(records))]
        session.add(EvaluationBatch(evaluation_id=run, seq=1, blob_key=key, sample_count=len(records),
                                    keys_json=json.dumps(keys), partial_json=partial))  # fmt: skip
        evaluation = session.get(Evaluation, run)
        assert evaluation is not None
        evaluation.sample_count = len(records)
        session.add(evaluation)
        session.commit()


@pytest.mark.parametrize(
    "partial",
    [None, "not json", json.dumps({"values": "nope", "rollouts": 1})],
    ids=["no-partial", "garbage-partial", "wrong-partial"],
)
def test_finalize_of_stored_scores_that_overflow_is_a_409_and_commits_nothing(
    hub: HardenedHub, client: TestClient, partial: str | None
) -> None:
    """Samples stored by a hub before these rules (two rewards of 1.7e308 sum to inf): the
    finalize is refused and the run stays open, instead of a 500 after the commit."""
    token = hub.tokens["bob"]
    run = new_run(client, token)
    plant_batch(hub, run, [{"example_index": i, "rollout_index": 0, "reward": 1.7e308}
                           for i in range(2)], partial)  # fmt: skip
    finalized = client.post(f"{EVALS}/{run}/finalize", headers=auth(token), json={})
    assert finalized.status_code == 409, finalized.text
    assert "finite" in finalized.json()["detail"]
    assert client.get(f"{EVALS}/{run}").json()["data"]["status"] == "running"
