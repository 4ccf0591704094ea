"""Supervised children: they die with the parent (even on SIGKILL) and a dead one is named."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from trainer_bridge.children import ChildDied, ChildProcesses


def wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
            state = Path(f"/proc/{pid}/status").read_text()
            if "State:\tZ" in state:
                return True
        except (ProcessLookupError, FileNotFoundError):
            return True
        time.sleep(0.1)
    return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_children_die_with_a_sigkilled_parent(tmp_path: Path) -> None:
    parent = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        from trainer_bridge.children import ChildProcesses
        sup = ChildProcesses()
        child = sup.start("sleeper", [sys.executable, "-c", "import time; time.sleep(600)"],
                          Path({str(tmp_path / "child.log")!r}))
        print(child.pid, flush=True)
        time.sleep(600)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    child_pid = int(proc.stdout.readline())
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    assert wait_gone(child_pid, 10), "the child outlived its SIGKILLed parent"


def test_a_dead_child_is_named_with_its_log_tail(tmp_path: Path) -> None:
    children = ChildProcesses()
    script = "import sys; print('loading weights'); print('boom: out of memory'); sys.exit(3)"
    child = children.start("trainer", [sys.executable, "-c", script], tmp_path / "t.log")
    assert child.proc is not None
    child.proc.wait(30)
    with pytest.raises(ChildDied) as caught:
        children.check()
    assert "the trainer process died (exit status 3)" in str(caught.value)
    assert "boom: out of memory" in str(caught.value)
    children.stop_all()


def test_stop_all_kills_the_whole_process_group(tmp_path: Path) -> None:
    children = ChildProcesses()
    script = (
        "import subprocess, sys, time;"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']);"
        "print(p.pid, flush=True); time.sleep(600)"
    )
    child = children.start("server", [sys.executable, "-c", script], tmp_path / "s.log")
    deadline = time.monotonic() + 30
    while not (tmp_path / "s.log").read_text().strip() and time.monotonic() < deadline:
        time.sleep(0.1)
    grandchild = int((tmp_path / "s.log").read_text().split()[0])
    children.stop_all(grace_s=5)
    assert child.poll() is not None
    assert wait_gone(grandchild, 10), "a grandchild (e.g. vLLM's engine) survived stop_all"
