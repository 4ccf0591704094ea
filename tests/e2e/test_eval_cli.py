"""`prime eval run` as users drive it: several providers side by side, JSON output, and bad
input that fails cleanly (a message, a non-zero exit, nothing written)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testing.server import FakeServer
from tests.e2e.eval_support import (
    SAY_ENV,
    TOOL_ENV,
    eval_run_json,
    prime,
    prime_env,
    records,
    run_dirs,
)

pytestmark = pytest.mark.timeout(600)


def test_two_providers_side_by_side(tmp_path: Path) -> None:
    key = "sk-fake-provider-key-123456"
    with FakeServer("openai", api_key=key) as oa, FakeServer("anthropic", api_key=key) as an:
        (tmp_path / "endpoints.toml").write_text(
            f'[oa]\nurl = "{oa.url}"\nkey_var = "FAKE_KEY"\nprice_in = 1.0\nprice_out = 2.0\n\n'
            f'[claude]\nurl = "{an.url}"\nkey_var = "FAKE_KEY"\nclient = "anthropic"\n'
        )
        env = prime_env(FAKE_KEY=key)
        both = ["eval", "run", str(SAY_ENV), "-m", "oa", "-m", "claude", "-n", "10", "-r", "2",
                "-a", '{"wrong_every": 2}']  # fmt: skip
        table = prime(*both, "-o", "out", cwd=tmp_path, env=env)
        as_json = prime(*both, "-o", "out2", "--output", "json", cwd=tmp_path, env=env)
    assert table.returncode == 0, table.stderr
    assert "oa" in table.stdout and "claude" in table.stdout and "0.500" in table.stdout
    assert "pass@2" in table.stdout
    runs = json.loads(as_json.stdout)["runs"]
    assert [r["model"] for r in runs] == ["oa", "claude"]
    for run in runs:
        assert run["summary"]["reward_mean"] == 0.5 and run["summary"]["errors"] == 0
        assert Path(tmp_path / run["directory"], "results.jsonl").is_file()
    assert runs[0]["cost_usd"] == pytest.approx(
        (40 * 1.0 + 20 * 2.0) / 1e6
    )  # 20 × ("say: wN" → "wN")
    for run_dir in run_dirs(tmp_path / "out"):
        text = (run_dir / "results.jsonl").read_text() + (run_dir / "metadata.json").read_text()
        assert key not in text  # keys never reach results
        assert len(records(run_dir)) == 20


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-a", "{not json"], "--env-args is not valid JSON"),
        (["-a", "[1]"], "--env-args must be a JSON object"),
        (["-S", '{"max_tokens": "many"}'], "max_tokens='many' has the wrong type"),
        (["-m", "gpt-4"], "cannot tell which provider serves 'gpt-4'"),
        (["-m", "openai/gpt-4.1-mini"], "OPENAI_API_KEY is not set"),
        (["-a", '{"no_such_arg": 1}'], "unexpected keyword argument"),
        # load_environment's own ValueError, quoted with the environment, never a traceback
        (["-a", '{"num_tasks": 0}'], "say_env.py: num_tasks must be at least 1, got 0"),
    ],
)
def test_bad_input_fails_cleanly(tmp_path: Path, args: list[str], message: str) -> None:
    result = prime("eval", "run", str(SAY_ENV), *args, "-o", "out", cwd=tmp_path)
    assert result.returncode != 0
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


def test_unknown_environment(tmp_path: Path) -> None:
    result = prime(
        "eval", "run", "no-such-env", "-m", "x", "--base-url", "http://127.0.0.1:9/v1", cwd=tmp_path
    )
    assert result.returncode == 1 and "is not installed" in result.stderr
    assert "Traceback" not in result.stderr


def test_unreachable_server_is_errors_not_zeros(tmp_path: Path) -> None:
    result = prime(
        "eval",
        "run",
        str(SAY_ENV),
        "-m",
        "x",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "-n",
        "3",
        "-r",
        "1",
        "--max-retries",
        "1",
        "-o",
        "out",
        cwd=tmp_path,
    )
    assert result.returncode == 1 and "every rollout of x failed" in result.stderr
    (run_dir,) = run_dirs(tmp_path / "out")
    rows = records(run_dir)
    assert len(rows) == 3
    assert all(r["reward"] is None and r["error"]["type"] == "connection_error" for r in rows)


@pytest.mark.parametrize(
    ("provider", "stream"), [("openai", "--stream"), ("anthropic", "--no-stream")]
)
def test_tool_loop_over_both_wire_formats(tmp_path: Path, provider: str, stream: str) -> None:
    with FakeServer(provider) as server:
        (tmp_path / "endpoints.toml").write_text(
            f'[fake]\nurl = "{server.url}"\nclient = "{provider}"\n'
        )
        out, run_dir = eval_run_json(
            tmp_path, str(TOOL_ENV), "-m", "fake", "-n", "5", "-r", "2", stream
        )
    assert out["runs"][0]["summary"]["reward_mean"] == 1.0
    for row in records(run_dir):
        roles = [m["role"] for m in row["completion"]]
        assert roles == ["assistant", "tool", "assistant"], row["completion"]
        call = row["completion"][0]["tool_calls"][0]["function"]
        assert call["name"] == "add" and json.loads(call["arguments"])["b"] == 1
