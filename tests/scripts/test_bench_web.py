"""bench_web runs end to end in its quick mode, so the script cannot rot.

Not a timed test: it asserts that the script finishes and prints each page's ratio to the
hub's JSON read and the load, never how fast a page was.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_bench_web_quick() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench_web.py"), "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    out = proc.stdout
    assert proc.returncode == 0, f"bench_web failed:\n{out[-3000:]}\n{proc.stderr[-3000:]}"
    for kind in ("home page", "search", "environment page", "samples page, reward filter"):
        assert re.search(rf"\| {kind} \| [\d.]+ ms \| [\d.]+ ms \| [\d.]+ \|", out), out
    assert re.search(r"load average [\d.]+ at the start", out), out
