"""Running a benchmark script in its quick mode, as the suite does so that no script can rot."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support import require

ROOT = Path(__file__).resolve().parents[2]


def run_quick(script: str, *args: str, timeout: float = 900) -> str:
    """Run `scripts/SCRIPT ARGS` from the repository root; its stdout, once it exited 0."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / script), *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert proc.returncode == 0, f"{script} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def run_quick_on_local_model(script: str, *args: str) -> str:
    """`run_quick`, skipped where the local model (extra `train`) is not installed."""
    from tests.trainer_bridge.conftest import local_model_available

    require(local_model_available(), "the local model (extra `train`)")
    return run_quick(script, *args)
