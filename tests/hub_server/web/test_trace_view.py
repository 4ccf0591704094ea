"""The run page draws a sample's trace graph: calls nested by branch (a subagent's call is a
root of its own), the simulated user's messages counted; a hostile trace draws nothing wrong."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from hub_server.admin import create_token, create_user, open_database
from hub_server.app import create_app
from hub_server.core.settings import HubSettings
from hub_server.web.trace_view import trace_tree
from tests.hub_server.wheels import twine_upload_form, wheel_bytes

SUBAGENT = {
    "example_index": 0,
    "rollout_index": 0,
    "reward": 1.0,
    "prompt": [
        {"role": "system", "content": "You are the lead agent."},
        {"role": "user", "content": "say: 4"},
    ],
    "completion": [
        {"role": "assistant", "content": "thinking"},
        {"role": "system", "content": "You are a research subagent."},
        {"role": "user", "content": "say: 4"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "A subagent reports: 4"},
        {"role": "assistant", "content": "<b>4</b>"},
    ],
    "trace": {
        "parents": [None, 0, 1, None, 3, 4, 2, 6],
        "calls": [
            {"request": 1, "reply": 2, "parent": None},
            {"request": 4, "reply": 5, "parent": None},
            {"request": 6, "reply": 7, "parent": 0},
        ],
        "simulated": [],
    },
}


def test_the_tree_of_a_subagent_rollout() -> None:
    html = str(trace_tree(SUBAGENT))
    assert "Trace: 3 model calls, 2 branches from 2 roots" in html
    assert html.count("<li>") == 3
    assert "call 3: → &lt;b&gt;4&lt;/b&gt;" in html  # nested under call 1, and escaped
    assert html.index("call 3") < html.index("call 2")  # the branch continues under its parent
    assert "from You are a research subagent." in html
    assert str(trace_tree({**SUBAGENT, "trace": None})) == ""
    hostile = {
        **SUBAGENT,
        "trace": {"parents": [5, "x", -1], "calls": [{"request": 99, "reply": -4, "parent": 7}, 3]},
    }
    assert "1 model calls" in str(trace_tree(hostile))


def test_the_run_page_shows_it(tmp_path: Path) -> None:
    settings = HubSettings(data_dir=tmp_path, uploads_per_minute=10_000)
    engine = open_database(settings)
    create_user(engine, "alice")
    token = create_token(engine, "alice", "cli")[0]
    engine.dispose()
    headers = {"Authorization": f"Bearer {token}"}
    with TestClient(create_app(settings)) as client:
        fields, files = twine_upload_form("agents", "1.0.0", wheel_bytes("agents", "1.0.0"))
        assert client.post("/alice/legacy/", auth=("__token__", token), data=fields, files=files)
        created = client.post(
            "/api/v1/evaluations/",
            headers=headers,
            json={"name": "r", "environments": [{"slug": "alice/agents"}], "model_name": "m"},
        )
        run_id = created.json()["evaluation_id"]
        pushed = client.post(
            f"/api/v1/evaluations/{run_id}/samples", headers=headers, json={"samples": [SUBAGENT]}
        )
        assert pushed.status_code == 200, pushed.text
        client.post(f"/api/v1/evaluations/{run_id}/finalize", headers=headers, json={})
        page = client.get(f"/alice/agents/evals/{run_id}", headers=headers)
    assert page.status_code == 200
    assert "Trace: 3 model calls, 2 branches from 2 roots" in page.text
