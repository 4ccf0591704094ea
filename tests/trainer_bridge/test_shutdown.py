"""shutdown.ShutdownGuard: the hard bound on a run's way out holds whatever still runs."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from prime_env.run_status import process_running

SCRIPT = textwrap.dedent(
    """
    import signal, sys, threading, time
    from pathlib import Path
    from trainer_bridge.shutdown import ShutdownGuard
    from trainer_bridge.protocol.run_dir import RunDir
    from trainer_bridge.children import ChildProcesses

    run = RunDir(Path(sys.argv[1]))
    run.root.mkdir(parents=True)
    run.update_run_json(status="running")
    children = ChildProcesses()
    children.start("child", [sys.executable, "-c", "import time; time.sleep(600)"],
                     run.root / "child.log")
    print(children.started[0].pid, flush=True)
    guard = ShutdownGuard(run, children, bound_s=float(sys.argv[2]))
    guard.signalled(signal.SIGTERM)
    # A non-daemon thread that never ends: the interpreter would wait for it forever.
    threading.Thread(target=time.sleep, args=(600,)).start()
    """
)


def test_the_bound_exits_with_the_signal_status_and_kills_the_children(tmp_path: Path) -> None:
    root = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(root), "1"],
        check=False, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 143, proc.stderr
    assert "shutdown exceeded 1 s, exited regardless" in proc.stderr
    info = json.loads((root / "run.json").read_text())
    assert info["status"] == "interrupted" and "SIGTERM" in info["error"]
    assert not process_running(int(proc.stdout.split()[0]))  # the supervised child was killed
