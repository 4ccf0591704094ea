"""What the run has used so far (CPU seconds, peak memory), for the metrics of both processes.

`tree_cpu_seconds` counts this process and every process under it (the trainer, torchrun's
workers, vLLM) from /proc, plus the children already reaped: the CPU-seconds a run costs on a
shared machine, whatever the other load (wall time would measure the neighbours too).
"""

from __future__ import annotations

import os
import resource
import sys
from pathlib import Path

PROC = Path("/proc")


def peak_rss_mb() -> float:
    """This process's peak resident set size in MiB (ru_maxrss is KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (1024 * 1024 if sys.platform == "darwin" else 1024), 1)


def cpu_seconds() -> float:
    """CPU seconds of this process and its reaped children."""
    usage = os.times()
    return usage.user + usage.system + usage.children_user + usage.children_system


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, user + system CPU seconds) of a live process, from /proc/PID/stat."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # after "pid (comm) "
    ticks = os.sysconf("SC_CLK_TCK")
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / ticks


def tree_cpu_seconds() -> float:
    """CPU seconds of this process, its live descendants (any depth, sessions of their own
    too: found by parent pid) and the children it reaped. Without /proc: this process's."""
    if not PROC.is_dir():
        return cpu_seconds()
    parents: dict[int, int] = {}
    used: dict[int, float] = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None:
                parents[int(entry.name)], used[int(entry.name)] = stat
    me = os.getpid()
    total = cpu_seconds()
    for pid, seconds in used.items():
        ancestor = parents.get(pid)
        while ancestor is not None and ancestor not in (me, 0, 1):
            ancestor = parents.get(ancestor)
        if ancestor == me:
            total += seconds
    return total
