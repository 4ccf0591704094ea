"""A stopped child's whole process group is reaped by its starter: a grandchild whose parent
died first (vLLM's engine core under its API server) is gone, not a zombie of init's, and its
CPU-seconds reach the starter's `wait4` (docs/benchmarks.md, "Engines": without this, runs
through vLLM undercounted their CPU by half or more)."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support import python_output

ROOT = Path(__file__).resolve().parents[2]
BURN_S = 1.0
LINUX = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="PR_SET_CHILD_SUBREAPER is Linux's"
)

STARTER = textwrap.dedent(
    """
    import json, os, resource, sys, time
    from pathlib import Path

    import engines.process as process

    if sys.argv[1] == "control":
        process.adopt_orphans = lambda: None  # as before: orphans go to init
    burn = (
        "import time\\n"
        "t = time.process_time()\\n"
        "while time.process_time() - t < {burn}: pass\\n"
        "print('burnt', flush=True)\\n"
        "time.sleep(600)\\n"
    )
    server = (  # a server that starts a worker and never reaps it, as vLLM's engine core
        "import subprocess, sys, time\\n"
        f"p = subprocess.Popen([sys.executable, '-c', {burn!r}])\\n"
        "print(p.pid, flush=True)\\n"
        "time.sleep(600)\\n"
    )
    log = Path(sys.argv[2])
    child = process.Child("server", [sys.executable, "-c", server], log)
    child.start()
    deadline = time.monotonic() + 60
    while "burnt" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    worker = int(log.read_text().split()[0])
    child.stop(grace_s=5)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(json.dumps({
        "children_cpu_s": usage.ru_utime + usage.ru_stime,
        "worker_left": os.path.exists(f"/proc/{worker}"),
    }))
    """
).replace("{burn}", str(BURN_S))


def _stop_and_count(tmp_path: Path, mode: str) -> dict[str, float]:
    argv = ["starter", mode, str(tmp_path / "s.log")]
    out = python_output(f"import sys; sys.argv = {argv!r}\n{STARTER}", cwd=ROOT)
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


@LINUX
def test_stop_reaps_the_orphaned_grandchild_and_counts_its_cpu(tmp_path: Path) -> None:
    result = _stop_and_count(tmp_path, "adopt")
    assert not result["worker_left"], "the grandchild is left (a zombie, or running)"
    assert result["children_cpu_s"] >= 0.9 * BURN_S, result


@LINUX
def test_without_adopting_the_grandchild_cpu_is_lost(tmp_path: Path) -> None:
    """The control: the same tree, orphans left to init; its CPU never reaches the starter."""
    result = _stop_and_count(tmp_path, "control")
    assert result["children_cpu_s"] < 0.5 * BURN_S, result
