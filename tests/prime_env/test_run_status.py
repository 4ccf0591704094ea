"""A run's status as read: `running` only while the process that wrote it lives (run_status).

A SIGKILLed process cannot write its last status; the reader must tell, from the owner recorded
beside `running`, that it is gone, without mistaking a reused pid for the run.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from prime_env import Environment, Rubric, SingleTurn
from prime_env.clients.model_specs import ModelSpec
from prime_env.eval_run_dir import EvalRunDir, RunConfig
from prime_env.evaluation import EvalError, EvalRun, execute, resume_run, start_run
from prime_env.run_status import owner_state, process_running, read_status, status_fields
from sandbox.owner import host_id
from tests.support import python_output

TASKS = [{"question": f"{i}+{i}", "answer": str(2 * i), "id": f"t{i}"} for i in range(3)]
SPEC = ModelSpec("scripted", "scripted-model", "scripted", "openai", None, None)
CONFIG = RunConfig("adder", None, {}, "scripted", None, 3, 1, {})


def one(completion: Any, answer: Any) -> float:
    return 1.0


def _env() -> Environment:
    return Environment(TASKS, SingleTurn(), Rubric([one]), name="adder")


class _Hanging:
    """A model client whose every call waits forever: the run is mid-rollout until stopped."""

    model, provider, base_url = "scripted-model", "scripted", None

    async def chat(self, messages: Any, **kw: Any) -> Any:
        await asyncio.sleep(3600)

    async def aclose(self) -> None:
        return None


# The eval-run writer of a real process, stopped mid-rollout: it prints its run directory once
# metadata.json says `running`, then waits in its first model call until it is killed.
WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from tests.prime_env.test_run_status import CONFIG, SPEC, _env, _Hanging
    from prime_env.evaluation import execute, start_run

    run = start_run(_env(), SPEC, CONFIG, Path(sys.argv[1]))
    print(run.directory, flush=True)
    asyncio.run(execute(run, _Hanging(), concurrency=1))
    """
)


def test_a_sigkilled_eval_run_reads_interrupted_a_live_one_running(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(tmp_path)],
        stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parents[2],
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        directory = Path(proc.stdout.readline().strip())
        live = EvalRunDir(directory).metadata()
        assert live.status == "running" and live.owner and live.owner["pid"] == proc.pid
        # a second process on the same results would write every rollout twice
        with pytest.raises(EvalError, match=rf"still running \(pid {proc.pid} on "):
            resume_run(directory, _env(), SPEC, CONFIG)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert EvalRunDir(directory).metadata().status == "interrupted"
    assert json.loads((directory / "metadata.json").read_text())["status"] == "running"
    resumed = resume_run(directory, _env(), SPEC, CONFIG)  # this process takes it over
    assert resumed.dir.metadata().owner == status_fields("running")["owner"]
    assert EvalRunDir(directory).metadata().status == "running"


def _running_here() -> dict[str, Any]:
    return status_fields("running")


def test_a_reused_pid_is_not_the_run() -> None:
    """The pid now belongs to a live process that started at another time: the run is gone."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        data = _running_here()
        data["owner"]["pid"] = sleeper.pid  # our start time, not the sleeper's
        assert owner_state(data) == "gone" and read_status(data) == "interrupted"
    finally:
        sleeper.kill()
        sleeper.wait()


def test_an_exited_owner_nobody_reaped_yet_is_gone() -> None:
    """A zombie keeps its pid and start time until its parent waits on it (a script's Popen)."""
    code = "import json; from prime_env.run_status import status_fields as f; print(json.dumps(f('running')))"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    data = json.loads(proc.stdout.read())
    os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped
    try:
        assert read_status(data) == "interrupted"
    finally:
        proc.wait()


def test_a_process_runs_until_it_exits_reaped_or_not() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    assert proc.stdin is not None
    assert process_running(os.getpid()) and process_running(proc.pid)
    proc.stdin.close()
    os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # a zombie: exited, not reaped
    assert not process_running(proc.pid)
    proc.wait()
    assert not process_running(proc.pid)


def test_the_live_owner_reads_running_and_other_statuses_pass_through() -> None:
    assert owner_state(_running_here()) == "alive" and read_status(_running_here()) == "running"
    for status in ("completed", "failed", "interrupted", "created"):
        assert read_status(status_fields(status)) == status
        assert status_fields(status)["owner"] is None
    # written before owners were recorded, or hand-edited: nothing to check, kept as written
    assert read_status({"status": "running"}) == "running"
    assert read_status({"status": "running", "owner": {"pid": "x"}}) == "running"
    assert read_status({}) is None


@pytest.mark.parametrize(
    ("change", "state"),
    [
        ({"host": "elsewhere/" + host_id().partition("/")[2]}, "unknown"),  # shared filesystem
        ({"pid_ns": "pid:[1]"}, "unknown"),  # a container's pids are not this /proc's
        ({"host": host_id().partition("/")[0] + "/an-earlier-boot"}, "gone"),  # rebooted
    ],
)
def test_what_cannot_be_checked_stays_as_written(change: dict[str, str], state: str) -> None:
    data = _running_here()
    data["owner"] |= change
    assert owner_state(data) == state
    assert read_status(data) == ("interrupted" if state == "gone" else "running")


def test_an_owner_recorded_without_a_start_time_falls_back_to_its_pid() -> None:
    """Where /proc is missing (macOS) only the pid was recorded."""
    data = _running_here()
    data["owner"]["start_time"] = ""
    assert owner_state(data) == "alive"
    data["owner"]["pid"] = int(python_output("import os; print(os.getpid())"))  # exited since
    assert owner_state(data) == "gone"


def _run(tmp_path: Path) -> EvalRun:
    return start_run(_env(), SPEC, CONFIG, tmp_path)


async def test_a_cancelled_eval_writes_interrupted_and_a_crashed_one_failed(
    tmp_path: Path,
) -> None:
    run = _run(tmp_path)
    task = asyncio.ensure_future(execute(run, _Hanging(), concurrency=1))
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    meta = run.dir.metadata()
    assert meta.status == "interrupted" and meta.owner is None and meta.error
    with pytest.raises(EvalError, match="client_factory"):
        await execute(run, _Hanging(), concurrency=1, workers=2)
    meta = run.dir.metadata()
    assert meta.status == "failed" and meta.error and "client_factory" in meta.error


def test_the_process_that_started_a_run_may_resume_it(tmp_path: Path) -> None:
    """A notebook that started a run and resumes it in the same process runs it once."""
    run = _run(tmp_path)
    assert resume_run(run.directory, _env(), SPEC, CONFIG).run_id == run.run_id
