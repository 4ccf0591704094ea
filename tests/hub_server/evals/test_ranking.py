"""Issue 26, class 7: a 1-example run at 1.0 ranked above a 400-example run at 0.905 without a
tie mark. Runs are ranked by the lower end of an interval whose width a handful of examples
cannot shrink below the board's spread, and rows the samples cannot tell apart are tied.
On SQLite and on PostgreSQL (the ranking is SQL)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.hub_server.hardening_hub import HardenedHub
from tests.hub_server.services import postgres_bin, postgres_cluster
from tests.support import require

EVALS = "/api/v1/evaluations"
BOARD = "/api/v1/environmentshub/alice/wordle/leaderboard"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def hub(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[HardenedHub, TestClient]]:
    if request.param == "sqlite":
        hub = HardenedHub(tmp_path)
        with hub.client() as client:
            yield hub, client
        return
    require(postgres_bin() is not None, "PostgreSQL (Debian package postgresql)")
    with postgres_cluster() as url:
        hub = HardenedHub(tmp_path, database_url=url)
        with hub.client() as client:
            yield hub, client
        hub.engine.dispose()


def finished(hub: HardenedHub, client: TestClient, model: str, rewards: list[float]) -> str:
    token = {"Authorization": f"Bearer {hub.tokens['alice']}"}
    run = client.post(f"{EVALS}/", headers=token, json={
        "name": model, "environments": [{"slug": "alice/wordle"}], "model_name": model,
        "is_public": True}).json()["data"]["id"]  # fmt: skip
    samples = [{"example_index": i, "rollout_index": 0, "reward": r} for i, r in enumerate(rewards)]
    assert (
        client.post(f"{EVALS}/{run}/samples", headers=token, json={"samples": samples}).status_code
        == 200
    )
    assert client.post(f"{EVALS}/{run}/finalize", headers=token, json={}).status_code == 200
    return str(run)


def board(client: TestClient) -> dict[str, dict[str, Any]]:
    return {row["model"]: row for row in client.get(BOARD).json()["data"]}


def test_one_example_at_1_never_ranks_above_400_at_0_905_untied(
    hub: tuple[HardenedHub, TestClient],
) -> None:
    hub_, client = hub
    finished(hub_, client, "big", [1.0] * 362 + [0.0] * 38)  # 0.905 over 400 examples
    finished(hub_, client, "one", [1.0])
    finished(hub_, client, "two", [1.0, 1.0])  # two examples: a standard error of 0
    rows = board(client)
    ordered = client.get(BOARD).json()["data"]
    assert ordered[0]["model"] == "big" and rows["big"]["rank"] == 1
    for small in ("one", "two"):
        above_untied = rows[small]["rank"] < rows["big"]["rank"] or (
            rows[small]["rank"] == rows["big"]["rank"] and not rows[small]["tied"]
        )
        assert not above_untied, rows
        # Its interval says how little one or two examples show.
        assert rows[small]["ci_high"] - rows[small]["ci_low"] > 0.5
    assert rows["one"]["n"] == 1 and rows["one"]["stderr"] is None


def test_a_clear_difference_still_ranks_and_each_model_shows_its_best_supported_run(
    hub: tuple[HardenedHub, TestClient],
) -> None:
    hub_, client = hub
    finished(hub_, client, "strong", [1.0] * 362 + [0.0] * 38)
    finished(hub_, client, "weak", [1.0] * 200 + [0.0] * 200)
    best = finished(hub_, client, "lucky", [1.0] * 300 + [0.0] * 100)  # 0.75 over 400
    finished(hub_, client, "lucky", [1.0])  # the same model's 1-example 1.0 run
    rows = board(client)
    assert rows["strong"]["rank"] == 1 and not rows["strong"]["tied"]
    assert rows["lucky"]["evaluation_id"] == best and rows["lucky"]["rank"] == 2
    assert rows["weak"]["rank"] == 3


def test_a_board_where_no_run_has_a_spread_ties_everything(
    hub: tuple[HardenedHub, TestClient],
) -> None:
    hub_, client = hub
    finished(hub_, client, "a", [1.0])
    finished(hub_, client, "b", [0.0])
    rows = board(client)
    assert rows["a"]["rank"] == rows["b"]["rank"] == 1 and rows["a"]["tied"] and rows["b"]["tied"]
