"""A run's CPU-seconds count every process under it, live or reaped, and nothing else."""

from __future__ import annotations

import subprocess
import sys
import time

from trainer_bridge.usage import cpu_seconds, tree_cpu_seconds

BUSY = "import time\nend = time.process_time() + {s}\nwhile time.process_time() < end: pass\n"


def test_a_live_grandchilds_cpu_counts_and_a_reaped_childs_too() -> None:
    tree, own = tree_cpu_seconds(), cpu_seconds()
    # a shell that starts a busy python and waits on it: the python is our grandchild
    code = BUSY.format(s=0.6) + "time.sleep(30)\n"
    shell = subprocess.Popen(["sh", "-c", f'"{sys.executable}" -c "$0"; exit 0', code])
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            others = (tree_cpu_seconds() - tree) - (cpu_seconds() - own)
            if others >= 0.5:
                break
            time.sleep(0.2)
        assert others >= 0.5  # the live grandchild's, which os.times() alone does not see
    finally:
        shell.kill()
        shell.wait()
    own = cpu_seconds()
    subprocess.run([sys.executable, "-c", BUSY.format(s=0.3)], check=True)
    assert cpu_seconds() - own >= 0.3  # a reaped child's CPU stays counted
