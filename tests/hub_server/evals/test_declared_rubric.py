"""Leaderboards the hub can vouch for, first half: a version that declares its rubric (each
function's weight and range, `[tool.prime.rubric]`, sent by `prime env push`) only takes
samples that rubric can produce. A run pushed with reward 9.0 whose components are all 0
ranked #1 on an environment whose maximum is 1.2; it is now refused at push."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from prime_cli.env.project import ProjectError, load_project
from prime_cli.env.scaffold import create_scaffold
from tests.hub_server.hardening_hub import HardenedHub
from tests.hub_server.wheels import wheel_bytes

API = "/api/v1/environmentshub"
EVALS = "/api/v1/evaluations"
RUBRIC = {"correct": {"weight": 1.0, "range": [0, 1]}, "format": {"weight": 0.2, "range": [0, 1]},
          "length": {"weight": 0, "range": [0, 100]}}  # fmt: skip


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HardenedHub, TestClient]]:
    hub = HardenedHub(tmp_path_factory.mktemp("rubric"))
    with hub.client() as client:
        token = {"Authorization": f"Bearer {hub.tokens['alice']}"}
        env_id = hub.env_ids["alice/wordle"]
        data = wheel_bytes("wordle", "1.0.0")
        reserved = client.post(f"{API}/{env_id}/wheels", headers=token, json={
            "filename": "wordle-1.0.0-py3-none-any.whl", "semantic_version": "1.0.0",
            "sha256": hashlib.sha256(data).hexdigest(), "size": len(data),
            "metadata": {"rubric": RUBRIC}})  # fmt: skip
        assert reserved.status_code == 200, reserved.text
        url = reserved.json()["data"]["upload_url"].removeprefix("http://testserver")
        assert client.put(url, content=data).status_code == 200
        done = client.post(f"{API}/{env_id}/wheels/{reserved.json()['data']['wheel_id']}/finalize",
                           headers=token)  # fmt: skip
        assert done.status_code == 200, done.text
        yield hub, client


def run_of(hub: HardenedHub, client: TestClient, version: str, who: str = "bob") -> str:
    answer = client.post(f"{EVALS}/", headers={"Authorization": f"Bearer {hub.tokens[who]}"}, json={
        "name": "r", "environments": [{"slug": "alice/wordle", "version": version}],
        "model_name": "m", "is_public": True})  # fmt: skip
    assert answer.status_code == 200, answer.text
    return str(answer.json()["data"]["id"])


def push(hub: HardenedHub, client: TestClient, run: str, samples: list[dict[str, Any]]) -> Any:
    return client.post(f"{EVALS}/{run}/samples", headers={"Authorization": f"Bearer {hub.tokens['bob']}"},
                       json={"samples": samples})  # fmt: skip


def sample(reward: float, **parts: float) -> dict[str, Any]:
    metrics = {"length": parts.pop("length")} if "length" in parts else {}
    return {"example_index": 0, "reward": reward, "rewards": parts, "metrics": metrics}


def test_the_version_shows_its_declared_rubric(hub: tuple[HardenedHub, TestClient]) -> None:
    _, client = hub
    versions = client.get(f"{API}/alice/wordle/versions").json()["data"]
    declared = {v["semantic_version"]: v["rubric"] for v in versions}
    assert declared["1.0.0"]["format"] == {"weight": 0.2, "range": [0.0, 1.0]}
    assert declared["0.1.0"] is None


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        (
            sample(9.0, correct=0.0, format=0.0),
            "reward is 9.0, but the environment's rubric makes it 0",
        ),
        (sample(1.2, correct=1.0, format=1.0, length=500), "metrics.length is 500"),
        (sample(1.5, correct=1.5, format=0.0), "rewards.correct is 1.5, outside the range"),
        (sample(1.0, correct=1.0), "rewards.format is missing"),
        (sample(1.0, correct=1.0, format=0.0, bonus=0.0), "rewards.bonus is not a reward function"),
        (sample(1.3, correct=1.0, format=1.0), "reward is 1.3"),
    ],
    ids=[
        "nine-with-zero-parts",
        "metric-out-of-range",
        "part-out-of-range",
        "part-missing",
        "undeclared-part",
        "wrong-sum",
    ],
)
def test_a_sample_the_declared_rubric_cannot_produce_is_refused(
    hub: tuple[HardenedHub, TestClient], bad: dict[str, Any], field: str
) -> None:
    hub_, client = hub
    run = run_of(hub_, client, "1.0.0")
    refused = push(hub_, client, run, [bad])
    assert refused.status_code == 400 and field in refused.json()["detail"], refused.text
    assert "samples[0]." in refused.json()["detail"]


def test_what_the_rubric_can_produce_is_accepted_and_other_versions_are_unchanged(
    hub: tuple[HardenedHub, TestClient],
) -> None:
    hub_, client = hub
    run = run_of(hub_, client, "1.0.0")
    good = [sample(1.2, correct=1.0, format=1.0, length=10), {**sample(0.2, correct=0.0, format=1.0),
            "example_index": 1}, {"example_index": 2, "error": {"type": "Timeout", "message": "x"}}]  # fmt: skip
    assert push(hub_, client, run, good).status_code == 200
    assert client.post(f"{EVALS}/{run}/finalize", headers={"Authorization": f"Bearer {hub_.tokens['bob']}"},
                       json={}).status_code == 200  # fmt: skip
    board = client.get(f"{API}/alice/wordle/leaderboard").json()["data"]
    assert all(row["mean_reward"] <= 1.2 for row in board)
    undeclared = run_of(hub_, client, "0.1.0")
    assert push(hub_, client, undeclared, [sample(9.0, correct=0.0)]).status_code == 200


def test_prime_env_push_reads_the_declaration_from_pyproject(tmp_path: Path) -> None:
    project = load_project(create_scaffold("declared", tmp_path))
    assert project.rubric is not None and project.rubric.root["correct_answer"].weight == 1.0
    assert project.rubric.reward_range() == (0.0, 1.0)
    pyproject = project.root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("range = [0, 1] }", "range = [1, 0] }"))
    with pytest.raises(ProjectError, match=r"\[tool.prime.rubric\].correct_answer.range"):
        load_project(project.root)
