"""bench_hub_abuse runs end to end in its quick mode (so the script cannot rot) and the hub
holds: every refusal a 4xx, RSS growth and disk within their budgets (the script's exit
status). It never asserts how fast anything was."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_bench_hub_abuse_quick() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench_hub_abuse.py"), "--quick"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    out = proc.stdout
    assert "every refusal a 4xx (no 5xx, no dropped answer): True" in out
    assert "RSS idle" in out and "load" in out and "targets met" in out
