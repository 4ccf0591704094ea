"""`prime eval run OWNER/NAME --push` against a real hub: the environment is installed on
demand (hub-resolved wheel, into a fresh venv), results are pushed through the evaluations
API, and `prime eval list/show/push` read them back."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import httpx
import pytest

from testing.server import FakeServer
from tests.e2e.cli_support import fresh_venv, venv_cli
from tests.e2e.eval_support import SAY_ENV, prime_env, run_dirs
from tests.hub_server.hubproc import HubProcess
from tests.hub_server.wheels import write_wheel

pytestmark = pytest.mark.timeout(900)


def publish_say_env(hub: HubProcess, token: str, directory: Path) -> None:
    """Upload the say environment as alice/say-env 0.1.0 through the twine endpoint."""
    entry_points = b"[prime.environments]\nsay-env = say_env:load_environment\n"
    wheel = write_wheel(
        directory,
        "say-env",
        "0.1.0",
        module_source=SAY_ENV.read_text(),
        extra_members={"say_env-0.1.0.dist-info/entry_points.txt": entry_points},
    )
    data = wheel.read_bytes()
    response = httpx.post(
        f"{hub.url}/alice/legacy/",
        auth=("__token__", token),
        data={
            ":action": "file_upload",
            "protocol_version": "1",
            "name": "say-env",
            "version": "0.1.0",
            "filetype": "bdist_wheel",
            "pyversion": "py3",
            "metadata_version": "2.1",
            "sha256_digest": hashlib.sha256(data).hexdigest(),
        },
        files={"content": (wheel.name, data, "application/octet-stream")},
        timeout=60,
    )
    assert response.status_code == 200, response.text


def test_run_installs_from_hub_pushes_and_reads_back(hub: HubProcess, tmp_path: Path) -> None:
    token = hub.add_user("alice")
    publish_say_env(hub, token, tmp_path / "dist")
    python = fresh_venv(tmp_path / "venv", sees_suite=True)
    env = prime_env(PRIME_HUB_URL=hub.url, PRIME_API_KEY=token, HOME=str(tmp_path))
    prime = venv_cli(python, env, tmp_path)

    with FakeServer("openai") as server:
        result = prime(
            "eval",
            "run",
            "alice/say-env@0.1.0",
            "-m",
            "fake",
            "--base-url",
            server.url,
            "-n",
            "5",
            "-r",
            "2",
            "-a",
            '{"wrong_every": 5}',
            "-o",
            "out",
            "--push",
            "--public",
            "--output",
            "json",
        )
    assert result.returncode == 0, result.stderr
    assert "is not installed here; installing it from" in result.stderr
    (run,) = json.loads(result.stdout)["runs"]
    evaluation_id = run["evaluation_id"]
    assert run["env"] == "say@0.1.0" and evaluation_id  # the name the environment gives itself

    shown = prime("eval", "show", evaluation_id, "--samples", "3", "--output", "json")
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert data["data"]["environment"]["version"] == "0.1.0"
    assert data["data"]["summary"]["scored"] == 10
    assert data["data"]["summary"]["reward_mean"] == pytest.approx(0.8)
    assert len(data["samples"]) == 3

    listed = json.loads(prime("eval", "list", "-e", "alice/say-env", "--output", "json").stdout)
    assert [item["id"] for item in listed["data"]] == [evaluation_id]

    (run_dir,) = run_dirs(tmp_path / "out")
    again = prime("eval", "push", str(run_dir))
    assert again.returncode == 1 and "already pushed" in again.stderr
    forced = prime("eval", "push", str(run_dir), "--force", "--output", "json")
    assert forced.returncode == 0, forced.stderr
    assert json.loads(forced.stdout)["pushed"][0]["evaluation_id"] != evaluation_id
    local = json.loads(prime("eval", "list", "--local", "out", "--output", "json").stdout)
    assert len(local["runs"][0]["pushes"]) == 2
