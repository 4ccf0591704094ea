"""Acceptance: `kill -9` a `prime eval run` halfway, then `--resume` gives exactly n×r unique
records; a resume with different settings is refused."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest

import prime_env as pe
from prime_env.clients.model_specs import resolve_model
from prime_env.eval_run_dir import RunConfig, read_results
from prime_env.evaluation import EvalError, resume_run, start_run
from prime_env.record import RolloutRecord
from testing.server import FakeServer
from tests.e2e.eval_support import PRIME, SAY_ENV, prime, prime_env, records, run_dirs

pytestmark = pytest.mark.timeout(600)


def test_kill_9_then_resume(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with FakeServer("openai", latency_ms=40) as server:
        args = [
            "eval",
            "run",
            str(SAY_ENV),
            "-m",
            "fake-model",
            "--base-url",
            server.url,
            "-n",
            "100",
            "-r",
            "2",
            "-c",
            "4",
            "-o",
            str(out),
        ]
        proc = subprocess.Popen(
            [str(PRIME), *args],
            cwd=tmp_path,
            env=prime_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 300
        lines = 0
        while time.monotonic() < deadline and proc.poll() is None:
            dirs = run_dirs(out)
            if dirs:
                lines = (dirs[0] / "results.jsonl").read_bytes().count(b"\n")
                if lines >= 60:
                    break
            time.sleep(0.05)
        assert proc.poll() is None, "the run finished before it could be killed; raise latency"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        (run_dir,) = run_dirs(out)
        before = records(run_dir)
        assert 60 <= len(before) < 200
        with (run_dir / "results.jsonl").open("a") as fh:
            fh.write('{"run_id": "torn mid-wr')  # what a crash in the middle of a write leaves

        changed = prime(
            *args[:3],
            "-m",
            "fake-model",
            "--base-url",
            server.url,
            "-n",
            "50",
            "--resume",
            str(run_dir),
            cwd=tmp_path,
        )
        assert changed.returncode == 1 and "refusing to resume" in changed.stderr
        assert "n: run has 100, command has 50" in changed.stderr

        resumed = prime("eval", "run", "--resume", str(run_dir), "-c", "32", cwd=tmp_path)
        assert resumed.returncode == 0, resumed.stderr
    after = records(run_dir)
    keys = [(r["example_index"], r["rollout_index"]) for r in after]
    assert len(after) == 200 and len(set(keys)) == 200
    assert {r["run_id"] for r in after} == {before[0]["run_id"]}
    assert after[: len(before)] == before  # finished rollouts were kept, not redone
    assert all(r["reward"] == 1.0 for r in after)
    assert '"status": "completed"' in (run_dir / "metadata.json").read_text()


def _record(run_id: str, example: int, rollout: int, reward: float | None) -> RolloutRecord:
    return RolloutRecord(
        run_id=run_id,
        env="g",
        task_id=f"t{example}",
        example_index=example,
        rollout_index=rollout,
        model="fake",
        prompt=[{"role": "user", "content": "say: w"}],
        reward=reward,
    )


def test_resume_drops_torn_lines_duplicates_and_incomplete_groups(tmp_path: Path) -> None:
    def exact(completion: list[dict], answer: str) -> float:
        return 1.0

    def shortest(completions: list[list[dict]]) -> list[float]:
        return [0.0 for _ in completions]

    tasks = pe.TaskSet.from_records([{"prompt": f"say: w{i}", "answer": f"w{i}"} for i in range(3)])
    env = pe.Environment(tasks, pe.SingleTurn(), pe.Rubric([exact, shortest]), name="g")
    spec = resolve_model("fake", base_url="http://127.0.0.1:9/v1")
    config = RunConfig(
        env="g",
        env_version=None,
        env_args={},
        model="fake",
        base_url="http://127.0.0.1:9/v1",
        n=3,
        r=2,
        sampling={},
    )
    run = start_run(env, spec, config, tmp_path)
    lines = [_record(run.run_id, e, k, 1.0).to_json() for e, k in [(0, 0), (0, 1), (1, 0), (0, 0)]]
    run.results_path.write_text("\n".join(lines) + "\n" + '{"run_id": "tor')

    resumed = resume_run(run.directory, env, spec, config)
    # group 1 has one of its two rollouts: it is rerun whole so its group reward sees both
    assert [rec.key for rec in resumed.done] == [(0, 0), (0, 1)]
    assert run.results_path.read_text().count("\n") == 2
    assert read_results(run.results_path) == resumed.done

    with pytest.raises(EvalError, match="r: run has 2, command has 3"):
        resume_run(run.directory, env, spec, replace(config, r=3))
    with pytest.raises(EvalError, match="is not an eval run directory"):
        resume_run(tmp_path, env, spec, config)


def test_a_resume_reruns_the_errored_rollouts_and_too_many_errors_exit_1(tmp_path: Path) -> None:
    """7 of 10 rollouts fail (a faulty server): the run exits 1 naming the share and the fix;
    `--resume --keep-errors` finishes nothing new; `--resume` against the healthy server runs
    exactly those 7 again (Inspect's eval-retry) and exits 0."""
    out = tmp_path / "out"
    with FakeServer("openai") as server:
        base = ["eval", "run", str(SAY_ENV), "-m", "fake", "-b", server.url]
        server.configure(script=["500"] * 7)
        first = prime(
            *base, "-n", "10", "-r", "1", "-c", "1", "--max-retries", "0", "-o", str(out),
            cwd=tmp_path,
        )  # fmt: skip
        (run,) = run_dirs(out)
        assert first.returncode == 1 and "Traceback" not in first.stderr
        assert "7 of 10 rollouts of fake errored (70%, over --max-error-share 0.1)" in first.stderr
        assert f"prime eval run --resume {run}" in " ".join(first.stderr.split())
        assert sum(r["error"] is not None for r in records(run)) == 7

        kept = prime("eval", "run", "--resume", str(run), "--keep-errors", cwd=tmp_path)
        assert kept.returncode == 1 and "(10/10 done)" in kept.stderr
        assert server.stats()["requests"] == 10

        again = prime("eval", "run", "--resume", str(run), "--output", "json", cwd=tmp_path)
        assert again.returncode == 0, again.stderr
        assert "(3/10 done; 7 errored rollouts to run again)" in again.stderr
        assert server.stats()["requests"] == 17  # only the errored ones ran again
    rows = records(run)
    assert len(rows) == 10 and len({r["example_index"] for r in rows}) == 10
    assert all(r["error"] is None and r["reward"] == 1.0 for r in rows)
    assert json.loads(again.stdout)["runs"][0]["summary"]["errors"] == 0
