"""`--program-on-host`: `prime eval run` and `prime eval optimize` run agent programs in sandboxes
unless told otherwise."""

from __future__ import annotations

import json
from pathlib import Path

from testing.server import FakeServer
from tests.e2e.eval_support import prime, records, run_dirs

ENV = """
import prime_env as pe

WHERE = "import os; print('sandbox' if os.path.exists('/prime/intercept/relay.py') else 'host')"


def on_host(state) -> float:
    return 1.0 if state["stdout"].strip() == "host" else 0.0


def load_environment() -> pe.Environment:
    return pe.Environment(
        [{"question": f"where are you? ({i})", "answer": ""} for i in range(6)],
        pe.Program(["python3", "-c", WHERE], sandbox="local"),
        pe.Rubric([on_host]),
        name="where",
    )
"""


def test_programs_run_in_a_sandbox_unless_on_host_is_asked(tmp_path: Path) -> None:
    env = tmp_path / "where_env.py"
    env.write_text(ENV)
    rewards = {}
    for flag in ([], ["--program-on-host"]):
        out = tmp_path / ("host" if flag else "sandbox")
        result = prime(
            "eval",
            "run",
            str(env),
            "-m",
            "fake",
            "-b",
            "http://127.0.0.1:9/v1",
            "-n",
            "1",
            "-r",
            "1",
            "-o",
            str(out),
            *flag,
            cwd=tmp_path,
        )
        assert result.returncode == 0, result.stderr[-2000:]
        [run] = run_dirs(out)
        [row] = records(run)
        assert row["error"] is None, row["error"]
        rewards[bool(flag)] = row["reward"]
    assert rewards == {False: 0.0, True: 1.0}


def test_optimize_runs_programs_on_host_when_asked(tmp_path: Path) -> None:
    env = tmp_path / "where_env.py"
    env.write_text(ENV)
    heldout = {}
    with FakeServer("openai") as reflection:
        reflection.script_replies(["```\nBe somewhere else.\n```"] * 4)
        for flag in ([], ["--program-on-host"]):
            result = prime(
                "eval", "optimize", str(env), "-m", "fake", "-b", "http://127.0.0.1:9/v1",
                "--reflection-model", "r", "--reflection-base-url", reflection.url,
                "--budget", "4", "--minibatch", "1", "--val-size", "2", "--test-size", "2",
                "--output", "json", "-o", str(tmp_path / "out"), *flag, cwd=tmp_path,
            )  # fmt: skip
            assert result.returncode == 0, result.stderr[-2000:]
            before = json.loads(result.stdout)["heldout"]["before"]
            assert before["errors"] == 0, before
            heldout[bool(flag)] = before["reward_mean"]
    assert heldout == {False: 0.0, True: 1.0}
