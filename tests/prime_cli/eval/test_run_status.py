"""`prime eval list --local`, `show` and `push` read an eval run's status as it stands: a run
whose process is gone is `interrupted`, listed so and never pushed as if complete."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from prime_cli.main import cli
from prime_env import Environment, Rubric, SingleTurn
from prime_env.clients.model_specs import ModelSpec
from prime_env.eval_run_dir import RunConfig
from prime_env.evaluation import start_run
from testing.server import FakeServer
from tests.e2e.eval_support import PRIME, SAY_ENV, prime_env, run_dirs
from trainer_bridge.protocol.run_dir import RunDir

TASKS = [{"question": "1+1", "answer": "2", "id": "t0"}]


def one(completion: Any, answer: Any) -> float:
    return 1.0


def _eval_run(output_dir: Path, *, owner_gone: bool) -> Path:
    """A run left `running` by this (live) process, or by one that is gone (its pid reused)."""
    env = Environment(TASKS, SingleTurn(), Rubric([one]), name="adder")
    spec = ModelSpec("scripted", "scripted-model", "scripted", "openai", None, None)
    config = RunConfig("alice/adder", None, {}, "scripted", None, 1, 1, {})
    run = start_run(env, spec, config, output_dir)
    if owner_gone:
        owner = run.dir.metadata().owner
        run.dir.update_metadata(owner={**(owner or {}), "start_time": "0"})
    return run.directory


def prime(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def test_an_interrupted_eval_is_listed_shown_and_refused_as_interrupted(tmp_path: Path) -> None:
    out = tmp_path / "outputs"
    directory = _eval_run(out, owner_gone=True)
    before = (directory / "metadata.json").read_text()
    listed = prime("eval", "list", "--local", str(out), "--output", "json")
    assert [r["status"] for r in json.loads(listed.stdout)["runs"]] == ["interrupted"]
    shown = prime("eval", "show", str(directory), "--output", "json")
    assert json.loads(shown.stdout)["data"]["status"] == "interrupted"

    pushed = prime("eval", "push", str(directory))
    assert pushed.exit_code == 1
    assert f"{directory} is not a complete run (status 'interrupted'" in pushed.output
    assert f"prime eval run --resume {directory}" in " ".join(pushed.output.split())
    assert "Traceback" not in pushed.output
    assert (directory / "metadata.json").read_text() == before  # nothing written
    nothing = prime("eval", "push", "-o", str(out))  # all unpushed finished runs: none
    assert nothing.exit_code == 1 and "no finished, unpushed runs" in nothing.output


def test_a_live_eval_is_running_and_waits_to_be_pushed(tmp_path: Path) -> None:
    directory = _eval_run(tmp_path / "outputs", owner_gone=False)
    shown = prime("eval", "show", str(directory), "--output", "json")
    assert json.loads(shown.stdout)["data"]["status"] == "running"
    pushed = prime("eval", "push", str(directory))
    assert pushed.exit_code == 1
    assert f"still running (pid {os.getpid()} on" in " ".join(pushed.output.split())


def test_an_interrupted_eval_of_a_train_run_is_finished_by_the_train_resume(
    tmp_path: Path,
) -> None:
    run = RunDir.new(tmp_path, "alice/adder", "m")
    run.set_status("interrupted")
    step0 = run.eval_dir(0)
    step0.mkdir()
    directory = _eval_run(tmp_path / "scratch", owner_gone=True)
    for name in ("metadata.json", "results.jsonl"):
        (step0 / name).write_bytes((directory / name).read_bytes())
    pushed = prime("eval", "push", str(step0))
    assert pushed.exit_code == 1
    assert f"prime train resume {run.root.resolve()}" in " ".join(pushed.output.split())


def _interruptible(command: list[str], **kwargs: Any) -> subprocess.Popen[str]:
    """Start `command` with SIGINT's default disposition, as a terminal's foreground job has: a
    suite started in the background by a non-interactive shell (`pytest ... &`, CI wrappers)
    ignores SIGINT, a child would inherit that, and Python then installs no Ctrl-C handler.
    A caught signal is reset to default by exec, so the parent catches it for the spawn."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return subprocess.Popen(command, **kwargs)
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize(
    ("sig", "code", "workers"),
    [(signal.SIGTERM, 143, "1"), (signal.SIGINT, 1, "1"), (signal.SIGTERM, 143, "2")],
    ids=["SIGTERM", "SIGINT", "SIGTERM-2-workers"],
)
def test_a_signal_stops_prime_eval_run_resumably_writing_interrupted(
    tmp_path: Path, sig: signal.Signals, code: int, workers: str
) -> None:
    """SIGTERM (a scheduler) takes Ctrl-C's path: cancelled, `interrupted` written; forked
    workers are stopped too (they must not inherit the parent's SIGTERM handler)."""
    out = tmp_path / "out"
    with FakeServer("openai", latency_ms=600_000) as server:  # every call waits: mid-rollout
        proc = _interruptible(
            [str(PRIME), "eval", "run", str(SAY_ENV), "-m", "fake-model", "--base-url",
             server.url, "-n", "2", "-w", workers, "-c", "2", "-o", str(out)],
            cwd=tmp_path, env=prime_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 120
        while not server.arrivals() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)  # until its first model call is in flight
        (directory,) = run_dirs(out)
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == code, stderr
    assert f"prime eval run --resume {directory}" in " ".join(stderr.split())
    meta = json.loads((directory / "metadata.json").read_text())
    assert meta["status"] == "interrupted" and meta["owner"] is None
