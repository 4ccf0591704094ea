"""`prime eval view RUN [RUN]`: the hub's run and compare pages over local run directories, on
a loopback port, with no hub. The app is read in process (TestClient); one test starts the
command itself and reads its page over 127.0.0.1."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from prime_cli.eval.view import read_run
from prime_cli.hub import local_viewer
from prime_cli.main import cli
from prime_env.eval_run_dir import EvalRunDir
from registry_index.summary import summarize
from tests.e2e.eval_support import PRIME


def record(run_id: str, example: int, rollout: int, reward: float | None) -> dict[str, Any]:
    error = {"type": "provider_error", "message": "503 after 3 tries"} if reward is None else None
    return {
        "run_id": run_id, "env": "prime/wordle@0.1.0", "task_id": f"t{example}",
        "example_index": example, "rollout_index": rollout, "model": "gpt-x",
        "prompt": [{"role": "system", "content": "Play wordle."},
                   {"role": "user", "content": f"Guess word {example}"}],
        "completion": [] if error else [{"role": "assistant", "content": f"<guess>crane{rollout}</guess>"},
                                        {"role": "user", "content": "Feedback: YGXXX"}],
        "reward": 0.0 if error else reward, "rewards": {} if error else {"correct": reward},
        "error": error, "stop_reason": None if error else "completed",
    }  # fmt: skip


def make_run(root: Path, run_id: str, rewards: list[list[float | None]]) -> Path:
    run = EvalRunDir.new(root, "prime/wordle@0.1.0", "gpt-x", run_id)
    rows = [record(run_id, e, r, v) for e, row in enumerate(rewards) for r, v in enumerate(row)]
    run.results_path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = summarize(run.read_results())
    run.update_metadata(run_id=run_id, model="gpt-x", env="prime/wordle@0.1.0",
                        env_version="0.1.0", status="completed",
                        summary=summary.model_dump())  # fmt: skip
    return run.root


@pytest.fixture
def two_runs(tmp_path: Path) -> tuple[Path, Path]:
    first = make_run(tmp_path / "out", "run-a", [[1.0, 0.0], [0.0, None]])
    second = make_run(tmp_path / "out", "run-b", [[1.0, 1.0], [1.0, 0.0]])
    return first, second


def test_the_run_page_shows_samples_as_conversations_with_the_hubs_filters(
    two_runs: tuple[Path, Path],
) -> None:
    client = TestClient(local_viewer([read_run(two_runs[0], set())]))
    home = client.get("/", follow_redirects=False)
    assert home.headers["location"] == "/prime/wordle/evals/run-a"
    page = client.get("/prime/wordle/evals/run-a").text
    assert page.count('<article class="sample') == 4
    assert (
        '<div class="msg assistant"><span class="role">assistant</span><pre>&lt;guess&gt;crane1'
        in page
    )
    assert '<div class="msg user"><span class="role">user</span><pre>Feedback: YGXXX' in page
    assert "error: provider_error" in page and "503 after 3 tries" in page
    assert "local viewer" in page and "Sign in" not in page
    errored = client.get("/prime/wordle/evals/run-a", params={"error": "any"}).text
    assert errored.count('<article class="sample') == 1
    scored = client.get("/prime/wordle/evals/run-a", params={"reward_min": "0.5"}).text
    assert scored.count('<article class="sample') == 1
    lines = client.get("/prime/wordle/evals/run-a/samples.jsonl").text.splitlines()
    assert len(lines) == 4 and json.loads(lines[3])["error"]["type"] == "provider_error"
    assert client.get("/static/hub.css").status_code == 200
    assert client.get("/prime/wordle/evals/nope").status_code == 404


def test_two_runs_compare_by_example_and_side_by_side(two_runs: tuple[Path, Path]) -> None:
    taken: set[str] = set()
    client = TestClient(local_viewer([read_run(p, taken) for p in two_runs]))
    home = client.get("/", follow_redirects=False)
    assert home.headers["location"] == "/prime/wordle/compare?a=run-a&b=run-b"
    compare = client.get(home.headers["location"]).text
    # example 0: 0.5 -> 1.0; example 1: 0.0 (its error not scored) -> 0.5
    assert compare.count("+0.500") == 2 and '<td class="num">1 / 0</td>' in compare
    side = client.get("/prime/wordle/compare/1", params={"a": "run-a", "b": "run-b"}).text
    assert side.count('<article class="sample') == 4
    assert side.index("run-a") < side.index("run-b")


def test_view_refuses_three_runs_and_what_is_not_a_run(tmp_path: Path, two_runs: Any) -> None:
    runner = CliRunner()
    three = runner.invoke(cli, ["eval", "view", "a", "b", "c"])
    assert three.exit_code != 0 and "one run, or two to compare" in three.output
    missing = runner.invoke(cli, ["eval", "view", str(tmp_path)])
    assert missing.exit_code != 0 and "is not an eval run directory" in missing.output
    unknown = runner.invoke(cli, ["eval", "view", "zzz", "-o", str(tmp_path / "out")])
    assert unknown.exit_code != 0 and "no run 'zzz'" in unknown.output


def test_the_command_serves_on_loopback_until_stopped(two_runs: tuple[Path, Path]) -> None:
    proc = subprocess.Popen(
        [str(PRIME), "eval", "view", str(two_runs[0])],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        deadline = time.monotonic() + 60
        while True:
            try:
                page = httpx.get(url, follow_redirects=True, timeout=10)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        assert page.status_code == 200 and "run-a" in page.text
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) in (0, -15)


def test_show_prints_samples_as_conversations_not_json(two_runs: tuple[Path, Path]) -> None:
    shown = CliRunner().invoke(cli, ["eval", "show", str(two_runs[0]), "--samples", "4"])
    assert shown.exit_code == 0, shown.output
    out = shown.output
    assert "── example 0 · rollout 0 · reward 1.000 (correct 1) · stop completed" in out
    assert "system: Play wordle.\nuser: Guess word 0\nassistant: <guess>crane0</guess>" in out
    assert "── example 1 · rollout 1 · error provider_error: 503 after 3 tries" in out
    assert '"prompt"' not in out  # no raw JSON records
    listed = CliRunner().invoke(cli, ["eval", "samples", str(two_runs[0]), "-n", "1"])
    assert listed.exit_code == 0 and "user: Guess word 0" in listed.output
