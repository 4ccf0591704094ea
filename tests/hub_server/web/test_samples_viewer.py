"""The run page's samples viewer (in-process): filters by reward range, error type and stop
reason in SQL, server-side paging, the reward histogram, the JSONL download, and comparing two
runs example by example; a run pushed before the index existed is indexed on first view."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session, delete

from hub_server.admin import create_token, create_user, open_database
from hub_server.app import create_app
from hub_server.core.settings import HubSettings
from hub_server.evals.models import EvaluationSample
from tests.hub_server.eval_push import push_eval
from tests.hub_server.wheels import twine_upload_form, wheel_bytes

N_EXAMPLES = 150  # x 2 rollouts = 300 samples in 3 batches


def sample(example: int, rollout: int, reward: float | None, **extra: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "example_index": example,
        "rollout_index": rollout,
        "reward": reward,
        "rewards": {"correct": reward or 0.0},
        "prompt": [{"role": "user", "content": f"question {example}"}],
        "completion": [{"role": "assistant", "content": f"answer {example}.{rollout}"}],
        "stop_reason": "length" if example % 10 == 0 else "stop",
        "error": None,
        **extra,
    }
    if reward is None:
        record["error"] = {"type": "RateLimitError", "message": "429 after 5 retries"}
    return record


def push_run(client: TestClient, token: str, model: str, reward_of: Any) -> str:
    run = {
        "name": f"run of {model}",
        "environments": [{"slug": "alice/maths"}],
        "model_name": model,
        "is_public": True,
        "metadata": {"sampling_args": {"temperature": 0.7}, "env_args": {"n": 3}},
    }
    records = [sample(i, r, reward_of(i, r)) for i in range(N_EXAMPLES) for r in range(2)]
    return push_eval(client, token, run, records, batch=100)


@pytest.fixture(scope="module")
def hub(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[TestClient, dict[str, str], Path]]:
    settings = HubSettings(
        data_dir=Path(tmp_path_factory.mktemp("samples")), uploads_per_minute=10_000
    )
    engine = open_database(settings)
    create_user(engine, "alice")
    token = create_token(engine, "alice", "cli")[0]
    engine.dispose()
    with TestClient(create_app(settings)) as client:
        fields, files = twine_upload_form("maths", "1.0.0", wheel_bytes("maths", "1.0.0"))
        response = client.post(
            "/alice/legacy/", auth=("__token__", token), data=fields, files=files
        )
        assert response.status_code == 200, response.text
        runs = {
            # reward i/150 on rollout 0, errors on every 7th example's rollout 1
            "a": push_run(
                client, token, "model-a", lambda i, r: None if r == 1 and i % 7 == 0 else i / 150
            ),
            "b": push_run(client, token, "model-b", lambda i, r: 1.0 if i % 2 else 0.0),
        }
        yield client, runs, settings.data_dir


def articles(html: str) -> list[str]:
    return re.findall(r"example (\d+) · rollout (\d+)", html)


def test_first_page_histogram_and_metadata(hub: tuple[TestClient, dict[str, str], Path]) -> None:
    client, runs, _ = hub
    page = client.get(f"/alice/maths/evals/{runs['a']}")
    assert page.status_code == 200
    assert len(articles(page.text)) == 20 and "300 matching of 300" in page.text
    assert "Page 1 of 15" in page.text
    assert page.text.count('class="bar"') == 10  # the reward histogram, drawn by the server
    assert "temperature" in page.text and "env_args" in page.text
    assert "RateLimitError (22)" in page.text  # the error facet with its count
    assert '<span class="chip">correct' in page.text  # the per-sample reward breakdown


def test_filters_by_reward_error_and_stop_reason_and_pages(
    hub: tuple[TestClient, dict[str, str], Path],
) -> None:
    client, runs, _ = hub
    url = f"/alice/maths/evals/{runs['a']}"
    high = client.get(url, params={"reward_min": "0.9"}).text
    # i/150 >= 0.9 for i in 135..149 on both rollouts, less the errored 140 and 147 (7*20, 7*21)
    assert "28 matching of 300" in high
    assert all(int(example) >= 135 for example, _ in articles(high))
    second = client.get(url, params={"reward_min": "0.9", "page": 2}).text
    assert len(articles(second)) == 8 and not set(articles(second)) & set(articles(high))
    errors = client.get(url, params={"error": "RateLimitError"}).text
    assert "22 matching" in errors and "429 after 5 retries" in errors
    assert (
        client.get(url, params={"error": "any", "reward_min": "0.5"}).text.count(
            "No samples match these filters"
        )
        == 1
    )
    length = client.get(url, params={"stop": "length"}).text
    assert "30 matching" in length and all(int(e) % 10 == 0 for e, _ in articles(length))
    junk = client.get(url, params={"reward_min": "nan", "reward_max": "abc"})
    assert junk.status_code == 200 and "300 matching" in junk.text


def test_jsonl_download_has_every_sample(hub: tuple[TestClient, dict[str, str], Path]) -> None:
    client, runs, _ = hub
    response = client.get(f"/alice/maths/evals/{runs['a']}/samples.jsonl")
    assert response.status_code == 200
    assert "attachment" in response.headers["content-disposition"]
    lines = [json.loads(line) for line in response.text.splitlines()]
    assert len(lines) == 300 and {line["example_index"] for line in lines} == set(range(150))


def test_compare_two_runs_example_by_example(hub: tuple[TestClient, dict[str, str], Path]) -> None:
    client, runs, _ = hub
    page = client.get("/alice/maths/compare", params={"a": runs["a"], "b": runs["b"]})
    assert page.status_code == 200 and "Page 1 of 3" in page.text
    rows = re.findall(r"<tr>\s*<td><a[^>]*>(\d+)</a></td>(.*?)</tr>", page.text, re.DOTALL)
    assert len(rows) == 50
    first = dict(rows)["1"]
    # example 1: A = 1/150 on both rollouts, B = 1.0
    assert "0.007" in first and "+0.993" in first
    assert (
        client.get("/alice/maths/compare", params={"a": runs["a"], "b": "nope"}).status_code == 404
    )


def test_a_run_without_index_rows_is_indexed_on_first_view(
    hub: tuple[TestClient, dict[str, str], Path],
) -> None:
    client, runs, data_dir = hub
    settings = HubSettings(data_dir=data_dir)
    engine = open_database(settings)
    with Session(engine) as session:
        session.exec(delete(EvaluationSample).where(EvaluationSample.evaluation_id == runs["b"]))  # type: ignore[call-overload]
        session.commit()
    engine.dispose()
    page = client.get(f"/alice/maths/evals/{runs['b']}", params={"reward_min": "1"}).text
    assert "150 matching of 300" in page
