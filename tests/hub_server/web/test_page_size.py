"""Issue 26, class 10: one 20 MiB completion made a 22 MB run page. A page renders a bounded
part of each sample (the rest is one click away in the run's JSONL), so pages stay small
whatever was pushed; a huge README is cut the same way."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from tests.hub_server.hardening_hub import HardenedHub
from tests.hub_server.wheels import twine_upload_form, wheel_bytes

EVALS = "/api/v1/evaluations"
HUGE = 20 * 1024 * 1024
PAGE_BUDGET = 1024 * 1024  # what a page of 20 samples may weigh, in bytes


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HardenedHub, TestClient]]:
    hub = HardenedHub(tmp_path_factory.mktemp("sizes"), max_json_bytes=40 * 1024 * 1024)
    with hub.client() as client:
        yield hub, client


def pushed_run(
    hub: HardenedHub, client: TestClient, samples: list[dict[str, object]],
    metadata: dict[str, object] | None = None,
) -> str:  # fmt: skip
    auth = {"Authorization": f"Bearer {hub.tokens['alice']}"}
    run = client.post(f"{EVALS}/", headers=auth, json={
        "name": "big", "environments": [{"slug": "alice/wordle"}], "model_name": "m",
        "is_public": True, "metadata": metadata or {}}).json()["data"]["id"]  # fmt: skip
    pushed = client.post(f"{EVALS}/{run}/samples", headers=auth, json={"samples": samples})
    assert pushed.status_code == 200, pushed.text[:300]
    assert client.post(f"{EVALS}/{run}/finalize", headers=auth, json={}).status_code == 200
    return str(run)


def test_a_20_mib_completion_makes_a_small_page_and_a_whole_jsonl(
    site: tuple[HardenedHub, TestClient],
) -> None:
    hub, client = site
    huge = "y" * HUGE
    samples = [
        {"example_index": 0, "reward": 1.0, "prompt": [{"role": "user", "content": "q" * 100_000}],
         "completion": [{"role": "assistant", "content": huge}]},
        {"example_index": 1, "reward": 0.0,
         "completion": [{"role": "assistant", "content": "m"} for _ in range(100_000)]},
        {"example_index": 2, "reward": 0.5, "answer": "a" * 1_000_000,
         "error": None, "stop_reason": "s" * 100_000},
    ]  # fmt: skip
    run = pushed_run(hub, client, samples)
    page = client.get(f"/alice/wordle/evals/{run}")
    assert page.status_code == 200
    assert len(page.content) < PAGE_BUDGET, len(page.content)
    assert "characters left out" in page.text and f"/evals/{run}/samples.jsonl" in page.text
    assert "more completion messages not shown" in page.text
    whole = client.get(f"/alice/wordle/evals/{run}/samples.jsonl")
    first = json.loads(whole.content.splitlines()[0])
    assert first["completion"][0]["content"] == huge


def test_huge_run_metadata_adds_little_to_its_page(site: tuple[HardenedHub, TestClient]) -> None:
    hub, client = site
    sample = {"example_index": 0, "reward": 1.0}
    plain = client.get(f"/alice/wordle/evals/{pushed_run(hub, client, [sample])}")
    metadata = {"k" * 500_000: "v", "notes": "n" * 400_000}  # within a create's 1 MiB body
    page = client.get(f"/alice/wordle/evals/{pushed_run(hub, client, [sample], metadata)}")
    assert plain.status_code == page.status_code == 200, plain.text[-500:]
    assert len(page.content) < len(plain.content) + 4_000, (len(page.content), len(plain.content))


def test_a_huge_readme_makes_a_small_environment_page(site: tuple[HardenedHub, TestClient]) -> None:
    hub, client = site
    readme = "# Title\n\n" + "A paragraph of words. " * 200_000  # 4.4 MB
    data = wheel_bytes("wordle", "0.3.0", description=readme,
                       extra_metadata=("Description-Content-Type: text/markdown",))  # fmt: skip
    fields, files = twine_upload_form("wordle", "0.3.0", data)
    uploaded = client.post("/alice/legacy/", auth=("__token__", hub.tokens["alice"]),
                           data=fields, files=files)  # fmt: skip
    assert uploaded.status_code == 200, uploaded.text
    page = client.get("/alice/wordle/v/0.3.0")
    assert page.status_code == 200
    assert len(page.content) < PAGE_BUDGET, len(page.content)
    assert "The README is cut here" in page.text
