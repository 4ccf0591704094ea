"""Issue 26, class 1: no stored row can take a page down. Rows and batches are planted
straight into the database and the blob store, as a hub before today's rules (or a hand-edited
database) could have left them, and every page and read that shows them is loaded."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session, select

from hub_server.core.ids import utcnow
from hub_server.evals.models import Evaluation, EvaluationBatch, EvaluationSample, EvaluationStatus
from hub_server.evals.samples import encode_batch
from hub_server.evals.service import batch_key
from hub_server.registry.models import Version
from tests.hub_server.hardening_hub import HardenedHub

INF, NAN = float("inf"), float("nan")

# Samples as no hub accepts them today, each breaking one assumption a page could make.
BAD_SAMPLES: list[dict[str, Any]] = [
    {"example_index": 0, "rollout_index": 0, "reward": 1, "rewards": {"x": "1.7e308"}},
    {"example_index": 1, "rollout_index": 0, "reward": "high", "metrics": {"m": [1, 2]}},
    {"example_index": 2**63, "rollout_index": 2**64, "reward": 1.7e308},
    {"example_index": "seven", "rollout_index": None, "reward": True, "rewards": [1, 2]},
    {"example_index": 3, "reward": None, "error": 42, "stop_reason": {"why": "x"}},
    {"example_index": 4, "reward": 0.5, "error": {"type": None}, "metrics": "fast"},
    {"example_index": 5, "reward": 0.5, "prompt": {"role": "user"}, "completion": [None, 7, "x"],
     "answer": ["a", {"b": 1}], "usage": {"prompt_tokens": "many"}},
]  # fmt: skip


def plant_run(hub: HardenedHub, **fields: Any) -> str:
    """A completed public run on alice/wordle by bob with `fields` as stored, and one batch of
    BAD_SAMPLES with index rows as bad as they come."""
    blob = encode_batch(BAD_SAMPLES)
    key = batch_key(hashlib.sha256(blob).hexdigest())
    hub.app.state.hub.store.put_bytes(blob, key)
    with Session(hub.engine) as session:
        version = session.exec(
            select(Version).where(Version.environment_id == hub.env_ids["alice/wordle"])
        ).one()
        run = Evaluation(
            name="planted", environment_id=version.environment_id, version_id=version.id,
            env_version=version.version, user_id=_user_id(hub, "bob"), model_name="planted-model",
            is_public=True, status=EvaluationStatus.COMPLETED,
            **{"finalized_at": utcnow(), "sample_count": len(BAD_SAMPLES), **fields},
        )  # fmt: skip
        session.add(run)
        session.flush()
        session.add(EvaluationBatch(evaluation_id=run.id, seq=1, blob_key=key,
                                    sample_count=len(BAD_SAMPLES), keys_json="[[0, 0]]",
                                    partial_json="{broken"))  # fmt: skip
        session.commit()
        return run.id


def _user_id(hub: HardenedHub, name: str) -> str:
    from hub_server.accounts.models import User

    with Session(hub.engine) as session:
        return session.exec(select(User).where(User.username == name)).one().id


ROWS: dict[str, dict[str, Any]] = {
    "inf-mean": {"reward_mean": INF, "reward_stderr": NAN, "n_examples": 1},
    "huge-mean": {"reward_mean": 1.7e308, "reward_stderr": -1.0, "n_examples": 2**62},
    "nan-mean": {"reward_mean": NAN, "summary_json": '{"reward_mean": Infinity}'},
    "garbage-json": {"reward_mean": 0.5, "summary_json": "{not json", "metadata_json": "[1",
                     "tags_json": '{"a": 1}', "client_metrics_json": "NaN"},
    "wrong-types": {"reward_mean": 0.5, "summary_json": json.dumps(
        {"reward_mean": "high", "rewards": {"x": "1e999"}, "pass_at_k": [1]}),
        "metadata_json": json.dumps({"k": {"deep": [1e308]}}), "tags_json": "[1, null, \"ok\"]"},
    "finite-but-odd": {"reward_mean": 0.25, "summary_json": json.dumps(
        {"reward_mean": 0.25, "reward_stderr": 1e300, "rewards": {"x": 1e300},
         "pass_at_k": {"1": 1e200}, "examples": 3}), "finalized_at": None},
}  # fmt: skip


@pytest.fixture(scope="module")
def planted(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[HardenedHub, TestClient, dict[str, str]]]:
    hub = HardenedHub(tmp_path_factory.mktemp("planted"))
    runs = {name: plant_run(hub, **fields) for name, fields in ROWS.items()}
    with Session(hub.engine) as session:  # index rows past anything an index may hold
        first = runs["inf-mean"]
        session.add(EvaluationSample(evaluation_id=first, seq=1, position=0,
                                     example_index=2**62, rollout_index=-5, reward=INF))  # fmt: skip
        session.add(EvaluationSample(evaluation_id=first, seq=1, position=1,
                                     example_index=1, rollout_index=0, reward=-INF))  # fmt: skip
        session.commit()
    with hub.client() as client:
        yield hub, client, runs


def pages(runs: dict[str, str]) -> list[str]:
    ids = list(runs.values())
    paths = ["/", "/alice", "/alice/wordle", "/alice/wordle/v/0.1.0", "/alice/wordle?lb_first_party=true",
             "/api/v1/evaluations/", "/api/v1/evaluations/?env=alice/wordle",
             "/api/v1/environmentshub/alice/wordle/leaderboard"]  # fmt: skip
    for run in ids:
        paths += [f"/alice/wordle/evals/{run}", f"/alice/wordle/evals/{run}?reward_min=0&error=any",
                  f"/alice/wordle/evals/{run}/samples.jsonl", f"/api/v1/evaluations/{run}",
                  f"/api/v1/evaluations/{run}/samples"]  # fmt: skip
    paths += [f"/alice/wordle/compare?a={a}&b={b}" for a, b in zip(ids, ids[1:] + ids[:1])]
    return paths


def test_every_page_showing_planted_rows_answers(
    planted: tuple[HardenedHub, TestClient, dict[str, str]],
) -> None:
    _hub, client, runs = planted
    failed = {}
    for path in pages(runs):
        response = client.get(path)
        if response.status_code != 200:
            failed[path] = (response.status_code, response.text[-300:])
    assert not failed, failed


def test_planted_numbers_show_as_missing_and_never_rank(
    planted: tuple[HardenedHub, TestClient, dict[str, str]],
) -> None:
    _hub, client, runs = planted
    board = client.get("/api/v1/environmentshub/alice/wordle/leaderboard").json()["data"]
    ranked = {row["evaluation_id"] for row in board}
    assert runs["inf-mean"] not in ranked and runs["nan-mean"] not in ranked
    assert runs["huge-mean"] not in ranked  # 1.7e308 is past the score bound
    info = client.get(f"/api/v1/evaluations/{runs['wrong-types']}").json()["data"]
    assert info["summary"] is None and info["tags"] == ["ok"]
    odd = client.get(f"/api/v1/evaluations/{runs['finite-but-odd']}").json()["data"]["summary"]
    assert odd["reward_mean"] == 0.25 and odd["reward_stderr"] is None
    assert odd["rewards"] == {} and odd["pass_at_k"] == {}
    page = client.get(f"/alice/wordle/evals/{runs['garbage-json']}").text
    assert "1.7e308" not in page.split("<main", 1)[-1] or "—" in page
