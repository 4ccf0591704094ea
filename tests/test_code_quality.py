"""The tree stays linted, formatted and typed: CI fails on a regression instead of piling it up."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
PACKAGES = [
    "registry_index",
    "hub_server",
    "hub_client",
    "prime_cli",
    "prime_env",
    "local_model",
    "engines",
    "sandbox",
    "testing",
    "trainer_bridge",
    "builtin_envs/publish.py",
    "scripts/gpu_check_train.py",
]


@pytest.mark.parametrize(
    "command",
    [
        ["ruff", "check", "."],
        ["ruff", "format", "--check", "."],
        ["mypy", *PACKAGES],
    ],
    ids=["ruff-check", "ruff-format", "mypy"],
)
def test_tool_passes(command: list[str]) -> None:
    proc = subprocess.run(
        [str(BIN / command[0]), *command[1:]], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
