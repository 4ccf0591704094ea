"""What this process has used so far (CPU seconds, peak memory), for both processes' metrics."""

from __future__ import annotations

import os
import resource
import sys


def peak_rss_mb() -> float:
    """This process's peak resident set size in MiB (ru_maxrss is KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (1024 * 1024 if sys.platform == "darwin" else 1024), 1)


def cpu_seconds() -> float:
    """CPU seconds of this process and its reaped children."""
    usage = os.times()
    return usage.user + usage.system + usage.children_user + usage.children_system
