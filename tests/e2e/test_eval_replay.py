"""`prime eval replay RUN --env OWNER/NAME@VERSION`: a run's saved completions re-scored with
another version's rubric, installed from the hub, without one model call, into a new run that
names the first; errored rollouts stay errors and a rubric that fails is a `scoring_error`."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from testing.server import FakeServer
from tests.e2e.cli_support import fresh_venv, one_line_error, venv_cli
from tests.e2e.eval_support import hub_runs, prime_env, records, run_dirs
from tests.hub_server.hubproc import HubProcess
from tests.hub_server.wheels import twine_upload_form, wheel_bytes

pytestmark = pytest.mark.timeout(900)

GRADED = """
import prime_env as pe

VERSION = "{version}"


def exact(completion, answer):
    said = (pe.last_assistant_text(completion) or "").strip()
    if VERSION == "0.1.0":
        return 1.0 if said == answer else 0.0
    if said == "x3":
        raise RuntimeError("the new rubric cannot grade x3")
    return 1.0 if said[1:] == answer[1:] else 0.0  # 0.2.0: the letter does not count


def load_environment():
    records = [
        {{"prompt": f"say: {{'x' if i % 2 else 'w'}}{{i}}", "answer": f"w{{i}}", "id": f"t{{i}}"}}
        for i in range(6)
    ]
    return pe.Environment(pe.TaskSet.from_records(records), pe.SingleTurn(), pe.Rubric([exact]))
"""


def _publish(hub: HubProcess, token: str, version: str) -> None:
    entry_points = b"[prime.environments]\ngraded = graded:load_environment\n"
    data = wheel_bytes(
        "graded",
        version,
        module_source=GRADED.format(version=version),
        extra_members={f"graded-{version}.dist-info/entry_points.txt": entry_points},
    )
    fields, files = twine_upload_form("graded", version, data)
    response = httpx.post(
        f"{hub.url}/alice/legacy/", auth=("__token__", token), data=fields, files=files, timeout=60
    )
    assert response.status_code == 200, response.text


def test_replay_rescores_with_another_version_and_no_model_calls(
    hub: HubProcess, tmp_path: Path
) -> None:
    token = hub.add_user("alice")
    for version in ("0.1.0", "0.2.0"):
        _publish(hub, token, version)
    python = fresh_venv(tmp_path / "venv", sees_suite=True)
    env = prime_env(PRIME_HUB_URL=hub.url, PRIME_API_KEY=token, HOME=str(tmp_path))

    prime = venv_cli(python, env, tmp_path)

    with FakeServer("openai") as server:
        server.configure(script=["500"])  # the first call fails: an errored rollout
        first = prime(
            "eval", "run", "alice/graded@0.1.0", "-m", "fake", "-b", server.url,
            "-n", "6", "-r", "1", "-c", "1", "--max-retries", "0", "--max-error-share", "0.5",
        )  # fmt: skip
        assert first.returncode == 0, first.stderr
        calls = server.stats()["requests"]
        [source] = run_dirs(tmp_path / "outputs")
        before = {r["task_id"]: (r["reward"], r["error"]) for r in records(source)}
        assert before["t0"][1]["type"] == "server_error"
        assert [before[f"t{i}"][0] for i in range(1, 6)] == [0.0, 1.0, 0.0, 1.0, 0.0]

        # another version is installed first (one process cannot reload an imported module)
        installing = prime("eval", "replay", source.name, "--env", "alice/graded@0.2.0")
        one_line_error(installing, "installed alice/graded 0.2.0", "run the command again")
        replayed = prime(
            "eval", "replay", source.name, "--env", "alice/graded@0.2.0", "--output", "json"
        )
        assert replayed.returncode == 0, replayed.stderr
        assert server.stats()["requests"] == calls  # not one model call
    out = json.loads(replayed.stdout)
    new = tmp_path / out["directory"]
    assert new != source and out["env"] == "alice/graded@0.2.0"
    meta = json.loads((new / "metadata.json").read_text())
    assert meta["status"] == "completed" and meta["env_version"] == "0.2.0"
    assert meta["replay_of"]["run_id"] == source.name and meta["model"] == "fake"
    rows = {r["task_id"]: r for r in records(new)}
    assert {r["run_id"] for r in rows.values()} == {meta["run_id"]}
    assert rows["t0"]["error"]["type"] == "server_error" and rows["t0"]["reward"] is None
    assert rows["t3"]["error"]["type"] == "scoring_error" and rows["t3"]["reward"] is None
    assert [rows[f"t{i}"]["reward"] for i in (1, 2, 4, 5)] == [1.0, 1.0, 1.0, 1.0]
    old = records(source)
    assert [r["completion"] for r in records(new)] == [r["completion"] for r in old]
    assert out["summary"]["errors"] == 2 and out["summary"]["reward_mean"] == 1.0

    pushed = prime("eval", "push", str(new), "--public")
    assert pushed.returncode == 0, pushed.stderr
    listed = hub_runs(hub.url, token, environment="alice/graded")
    [evaluation] = listed
    assert evaluation["environment"]["version"] == "0.2.0"
    assert evaluation["metadata"]["replay_of"]["run_id"] == source.name

    unfinished = tmp_path / "outputs" / "evals" / "x" / "run"
    unfinished.mkdir(parents=True)
    meta["status"] = "interrupted"
    (unfinished / "metadata.json").write_text(json.dumps(meta))
    (unfinished / "results.jsonl").write_text("")
    one_line_error(prime("eval", "replay", str(unfinished)), "not a completed run")
