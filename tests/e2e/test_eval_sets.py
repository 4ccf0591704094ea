"""Eval sets: `prime eval run ENV1 ENV2 -m A -m B` runs the matrix in one set directory, retries
a cell's errored rollouts (only those run again), pushes each cell when it is done (never a cell
of errors only), prints one table of mean ± SE per cell, and `--resume SETDIR` finishes a set
without rerunning its finished cells."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from testing.server import FakeServer
from tests.e2e.cli_support import fresh_venv, venv_cli
from tests.e2e.eval_support import ROOT, SAY_ENV, hub_runs, prime_env, records
from tests.e2e.eval_support import prime as run_prime
from tests.e2e.test_eval_hub import publish_say_env
from tests.hub_server.hubproc import HubProcess
from tests.hub_server.wheels import twine_upload_form, wheel_bytes
from tests.support import free_port

pytestmark = pytest.mark.timeout(900)


def _publish_echo_env(hub: HubProcess, token: str) -> None:
    """alice/echo-env 0.1.0: the say environment under a second name."""
    entry_points = b"[prime.environments]\necho-env = echo_env:load_environment\n"
    data = wheel_bytes(
        "echo-env",
        "0.1.0",
        module_source=SAY_ENV.read_text(),
        extra_members={"echo_env-0.1.0.dist-info/entry_points.txt": entry_points},
    )
    fields, files = twine_upload_form("echo-env", "0.1.0", data)
    response = httpx.post(
        f"{hub.url}/alice/legacy/", auth=("__token__", token), data=fields, files=files, timeout=60
    )
    assert response.status_code == 200, response.text


def test_matrix_retries_push_and_resume(hub: HubProcess, tmp_path: Path) -> None:
    token = hub.add_user("alice")
    publish_say_env(hub, token, tmp_path / "dist")
    _publish_echo_env(hub, token)
    python = fresh_venv(tmp_path / "venv", sees_suite=True)
    env = prime_env(PRIME_HUB_URL=hub.url, PRIME_API_KEY=token, HOME=str(tmp_path))
    endpoints = tmp_path / "endpoints.toml"
    envs = ["alice/say-env@0.1.0", "alice/echo-env@0.1.0"]

    prime = venv_cli(python, env, tmp_path)

    with FakeServer("openai") as server:
        dead = f"http://127.0.0.1:{free_port()}/v1"
        endpoints.write_text(f'[fake]\nurl = "{server.url}"\n\n[down]\nurl = "{dead}"\n')
        # the very first model call fails: the set's first cell has one errored rollout
        server.configure(script=["500"])
        first = prime(
            "eval", "run", *envs, "-m", "fake", "-m", "down", "-n", "3", "-r", "2", "-c", "1",
            "--max-retries", "0", "--retries", "1", "--push", "--public",
        )  # fmt: skip
        assert first.returncode == 1, first.stderr
        assert "Traceback" not in first.stderr
        error = first.stderr.strip().splitlines()[-1]
        assert error.startswith("Error: 2 of 4 cells failed"), error
        assert "down: every rollout failed" in error and "prime eval run --resume" in error
        assert "retrying alice/say-env@0.1.0 × fake (1 errored rollouts" in first.stderr
        # 2 cells × 6 rollouts, plus the one errored rollout run again
        assert server.stats()["requests"] == 13
        [set_dir] = (tmp_path / "outputs" / "sets").iterdir()
        state = json.loads((set_dir / "set.json").read_text())
        cells = {(c["env"], c["model"]): c for c in state["cells"]}
        assert [c["status"] for c in state["cells"]] == ["completed", "failed"] * 2
        first_cell = cells[(envs[0], "fake")]
        assert first_cell["attempts"] == 2 and first_cell["evaluation_id"]
        rows = records(set_dir / first_cell["directory"])
        assert len(rows) == 6 and all(r["error"] is None and r["reward"] == 1.0 for r in rows)
        assert cells[(envs[0], "down")]["evaluation_id"] is None  # errors only: never pushed
        title = f"eval set {state['set_id']}: n=3, r=2, reward mean ± se"
        assert title in [line.strip() for line in first.stdout.splitlines()]  # one line, unfolded
        table = [line for line in first.stdout.splitlines() if line.count("│") >= 3]
        assert [line.split("│")[1].strip() for line in table] == envs
        assert all("1.000 ± 0.000" in line and "failed" in line for line in table)

        # the dead endpoint comes back: resume runs only the failed cells
        endpoints.write_text(f'[fake]\nurl = "{server.url}"\n\n[down]\nurl = "{server.url}"\n')
        resumed = prime("eval", "run", "--resume", str(set_dir), "--push", "--output", "json")
        assert resumed.returncode == 0, resumed.stderr
        assert server.stats()["requests"] == 13 + 12
    out = json.loads(resumed.stdout)
    assert [c["status"] for c in out["cells"]] == ["completed"] * 4
    assert all(c["summary"]["reward_mean"] == 1.0 for c in out["cells"])
    ids = [c["evaluation_id"] for c in out["cells"]]
    assert ids[0] == first_cell["evaluation_id"] and len(set(ids)) == 4  # each pushed once
    listed = hub_runs(hub.url, token, per_page=50)
    assert sorted(e["id"] for e in listed) == sorted(ids)
    meta = json.loads((set_dir / first_cell["directory"] / "metadata.json").read_text())
    assert meta["eval_set"]["set_id"] == state["set_id"]

    changed = prime("eval", "run", "--resume", str(set_dir), "-n", "4")
    assert changed.returncode == 1 and "refusing to resume the set" in changed.stderr


def test_a_set_of_builtins_with_their_reference_policies(tmp_path: Path) -> None:
    """`-m reference` in a matrix: each cell's client is the cell's environment's own policy."""
    envs = [str(ROOT / "builtin_envs" / name) for name in ("arithmetic", "reverse-text")]
    result = run_prime(
        "eval", "run", *envs, "-m", "reference", "-n", "3", "-r", "1", "--output", "json",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    cells = json.loads(result.stdout)["cells"]
    assert [c["status"] for c in cells] == ["completed"] * 2
    # each cell scores its own reference's declared minimum (arithmetic: 1.0 + format 0.2)
    assert [c["summary"]["reward_mean"] for c in cells] == pytest.approx([1.2, 1.0])
