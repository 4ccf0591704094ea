"""`prime eval` as a user of the stock client would drive it: `prime eval ENV`, advice for an
unknown name, `show` of a missing path, run ids by prefix, `samples -p -n`, `push` with no
directory, `get`, a summary that fits 80 columns, and all-zero rewards explained.

Models are the fake OpenAI-compatible provider (testing/server.py); the hub is real."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from testing.server import FakeServer
from tests.e2e.eval_support import SAY_ENV, prime, prime_env, run_dirs
from tests.e2e.test_eval_hub import publish_say_env
from tests.hub_server.hubproc import HubProcess

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def model() -> Iterator[str]:
    with FakeServer("openai") as server:
        yield server.url


def _error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("Error: ")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


def test_advice_and_missing_paths(tmp_path: Path, model: str) -> None:
    env = prime_env(HOME=str(tmp_path), COLUMNS="300")
    unknown = prime("eval", "nosuchenv", "-m", "fake", "-b", model, cwd=tmp_path, env=env)
    assert unknown.returncode == 1
    line = _error_line(unknown.stderr)
    assert "prime env list -s nosuchenv" in line and "prime env install OWNER/nosuchenv" in line
    assert "`prime env install nosuchenv`" not in line  # that command would fail (needs OWNER/)

    missing = prime("eval", "show", "/no/such/dir", cwd=tmp_path, env=env)
    assert missing.returncode == 1
    assert "/no/such/dir is not an eval run directory" in _error_line(missing.stderr)


def test_zero_rewards_narrow_table_and_prefixes(tmp_path: Path, model: str) -> None:
    env = prime_env(HOME=str(tmp_path), COLUMNS="80")
    result = prime(
        "eval", str(SAY_ENV), "-m", "fake", "-b", model, "-n", "4", "-r", "1",
        "-a", '{"wrong_every": 1}', cwd=tmp_path, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "all 4 scored rollouts got reward 0" in result.stdout
    assert "not errors" in result.stdout
    table = result.stdout.split("all 4 scored")[0]
    assert max(len(line) for line in table.splitlines()) <= 80, table
    assert "reward (mean ± se)" in table and "tokens in/out" in table  # metrics as rows

    (run_dir,) = run_dirs(tmp_path / "outputs")
    prefix = run_dir.name[:5]
    shown = prime("eval", "get", prefix, "--output", "json", cwd=tmp_path, env=env)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["data"]["run_id"] == run_dir.name
    page = prime("eval", "samples", prefix, "-n", "3", "-p", "2", "--output", "json",
                 cwd=tmp_path, env=env)  # fmt: skip
    assert page.returncode == 0, page.stderr
    body = json.loads(page.stdout)
    assert (body["total"], len(body["samples"])) == (4, 1)


def test_push_without_a_directory_and_hub_prefixes(
    hub: HubProcess, tmp_path: Path, model: str
) -> None:
    token = hub.add_user("alice")
    publish_say_env(hub, token, tmp_path / "dist")
    env = prime_env(HOME=str(tmp_path), COLUMNS="200", PRIME_HUB_URL=hub.url, PRIME_API_KEY=token)
    for _ in range(2):
        ran = prime("eval", "run", str(SAY_ENV), "-m", "fake", "-b", model, "-n", "3", "-r", "1",
                    cwd=tmp_path, env=env)  # fmt: skip
        assert ran.returncode == 0, ran.stderr

    pushed = prime("eval", "push", "-e", "alice/say-env", "--output", "json", cwd=tmp_path, env=env)
    assert pushed.returncode == 0, pushed.stderr
    ids = [item["evaluation_id"] for item in json.loads(pushed.stdout)["pushed"]]
    assert len(ids) == 2
    again = prime("eval", "push", cwd=tmp_path, env=env)
    assert "no finished, unpushed runs" in _error_line(again.stderr)

    listed = prime("eval", "list", "-e", "alice/say-env", "-n", "1", "-p", "2", "--output", "json",
                   cwd=tmp_path, env=env)  # fmt: skip
    body = json.loads(listed.stdout)
    assert (body["total"], len(body["data"])) == (2, 1)

    shown = prime("eval", "get", ids[0][:8], "--output", "json", cwd=tmp_path, env=env)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["data"]["id"] == ids[0]
    samples = prime("eval", "samples", ids[1][:8], "-n", "2", "--output", "json",
                    cwd=tmp_path, env=env)  # fmt: skip
    assert samples.returncode == 0, samples.stderr
    assert (json.loads(samples.stdout)["total"], len(json.loads(samples.stdout)["samples"])) == (
        3,
        2,
    )
