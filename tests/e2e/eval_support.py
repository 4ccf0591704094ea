"""Helpers for the `prime eval` end-to-end tests: run the CLI, find and read run directories,
list the runs a hub holds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

PRIME = Path(sys.executable).with_name("prime")
ROOT = Path(__file__).resolve().parents[2]
SAY_ENV = ROOT / "testing" / "envs" / "say_env.py"
TOOL_ENV = ROOT / "testing" / "envs" / "tool_env.py"


def prime_env(**extra: str) -> dict[str, str]:
    """The environment for a `prime` subprocess: no real provider keys, this checkout importable."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra)
    return env


def prime(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(PRIME), *args],
        cwd=cwd,
        env=env or prime_env(),
        text=True,
        capture_output=True,
        timeout=timeout,
        check=False,
    )


def run_dirs(out: Path) -> list[Path]:
    return sorted(p.parent for p in out.glob("evals/*/*/metadata.json"))


def records(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]


def eval_run_json(tmp_path: Path, *args: str) -> tuple[dict[str, Any], Path]:
    """`prime eval run ARGS -o out --output json` in `tmp_path`, which must succeed: what it
    printed, and the run directory it wrote."""
    result = prime("eval", "run", *args, "-o", "out", "--output", "json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (run_dir,) = run_dirs(tmp_path / "out")
    return json.loads(result.stdout), run_dir


def hub_runs(hub_url: str, token: str, **params: Any) -> list[dict[str, Any]]:
    """One page of the runs `token` may read on the hub (`GET /api/v1/evaluations/`)."""
    answer = httpx.get(
        f"{hub_url}/api/v1/evaluations/",
        params=params,
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    return list(answer.json()["data"])
