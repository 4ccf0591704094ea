"""`prime eval run -w N`: rollouts in N worker processes, one results file, resumable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testing.server import FakeServer
from tests.e2e.eval_support import SAY_ENV, prime, prime_env, records, run_dirs

pytestmark = pytest.mark.timeout(600)


def test_workers_share_the_run_and_resume_finishes_it(tmp_path: Path) -> None:
    with FakeServer("openai", faults={"500": 0.02}, seed=3) as server:
        args = ["eval", "run", str(SAY_ENV), "-m", "fake-model", "--base-url", server.url]
        args += ["-n", "60", "-r", "2", "-c", "8", "-a", '{"num_tasks": 60, "wrong_every": 4}']
        done = prime(*args, "-w", "3", "-o", "out", "--output", "json", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        [run] = json.loads(done.stdout)["runs"]
        assert run["new_rollouts"] == 120 and run["summary"]["rollouts"] == 120
        [directory] = run_dirs(tmp_path / "out")
        rows = records(directory)
        assert sorted((r["example_index"], r["rollout_index"]) for r in rows) == [
            (i, j) for i in range(60) for j in range(2)
        ]
        # every 4th task asks for the wrong word: a quarter of the scored rollouts are 0
        scored = [r for r in rows if r["error"] is None]
        assert sum(r["reward"] == 0.0 for r in scored) == sum(
            r["example_index"] % 4 == 0 for r in scored
        )
        assert run["summary"]["errors"] == sum(r["error"] is not None for r in rows)

        # a torn run: drop a third of the lines; --resume with workers runs only those
        kept = (directory / "results.jsonl").read_text().splitlines()[:80]
        (directory / "results.jsonl").write_text("\n".join(kept) + "\n")
        again = prime(
            "eval", "run", "--resume", str(directory), "-w", "2", "--output", "json",
            cwd=tmp_path, env=prime_env(),
        )  # fmt: skip
        assert again.returncode == 0, again.stderr
        [resumed] = json.loads(again.stdout)["runs"]
        assert resumed["new_rollouts"] == 40 and resumed["summary"]["rollouts"] == 120
        assert len(records(directory)) == 120


def test_more_workers_than_concurrency_is_a_clear_error(tmp_path: Path) -> None:
    with FakeServer("openai") as server:
        done = prime(
            "eval", "run", str(SAY_ENV), "-m", "fake-model", "--base-url", server.url,
            "-n", "4", "-c", "2", "-w", "3", "-o", "out", cwd=tmp_path,
        )  # fmt: skip
    assert done.returncode != 0
    assert "cannot be shared by 3 worker processes" in done.stderr
    assert "Traceback" not in done.stderr
