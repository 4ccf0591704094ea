"""Acceptance: `kill -9` a `prime eval run` halfway, then `--resume` gives exactly n×r unique
records; a resume with different settings is refused."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.eval_support import PRIME, SAY_ENV, prime, prime_env, records, run_dirs
from tests.fakes.server import FakeServer

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
