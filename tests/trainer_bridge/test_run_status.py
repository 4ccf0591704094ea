"""run.json's status as read (RunDir.status): a SIGKILLed `prime train` reads `interrupted`,
and `prime train resume` refuses a run whose process still runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from registry_index.files import write_atomic
from trainer_bridge import launch
from trainer_bridge.config import ConfigError
from trainer_bridge.config_loader import build_config, to_toml
from trainer_bridge.protocol.run_dir import RunDir, train_run_of

# What launch.execute records at its start, in a real process that then waits to be killed.
WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from trainer_bridge.protocol.run_dir import RunDir

    run = RunDir.new(Path(sys.argv[1]), "x/y", "m")
    run.set_status("running", error=None)
    print(run.root, flush=True)
    time.sleep(600)
    """
)


def test_a_sigkilled_train_run_reads_interrupted_and_resumes(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        run = RunDir(Path(proc.stdout.readline().strip()))
        assert run.status() == "running"
        assert run.read_run_json()["owner"]["pid"] == proc.pid
        write_atomic(run.resolved_config, to_toml(build_config([], [], env_id="x/y")))
        # two orchestrators on one run dir would each train and checkpoint it
        with pytest.raises(ConfigError, match=rf"still running \(pid {proc.pid} on "):
            launch.resume(run.root)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert run.status() == "interrupted"
    assert run.read_run_json()["status"] == "running"  # nothing could write it
    assert launch.resume(run.root).run == run


def test_a_final_status_clears_the_owner(tmp_path: Path) -> None:
    run = RunDir.new(tmp_path, "x/y", "m")
    assert run.set_status("running")["owner"]["pid"] == os.getpid()
    info = run.set_status("interrupted", error="interrupted by SIGTERM")
    assert info["owner"] is None and run.status() == "interrupted"


def test_an_eval_of_a_train_run_knows_its_run(tmp_path: Path) -> None:
    run = RunDir.new(tmp_path, "x", "m")
    run.set_status("created")
    assert train_run_of(run.eval_dir(0)) == run.root.resolve()
    assert train_run_of(tmp_path / "evals" / "x--m" / "abc") is None
