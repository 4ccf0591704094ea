"""What the foreign-environment tests share: the wheelhouse their virtualenvs install from, and
the environment `prime` runs in (its own home, isolated environments, uv caches; no index)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from tests.e2e.eval_support import ROOT
from tests.support import require

WHEELHOUSE = ROOT / ".venv" / "wheelhouse" / "foreign-1"
"""verifiers 0.4.0 and openenv-core 0.3.0 with every dependency, as wheels (scripts/setup.sh)."""
FOREIGN = ROOT / "tests" / "foreign"


def wheelhouse() -> Path:
    require((WHEELHOUSE / ".complete").exists(), f"the wheelhouse {WHEELHOUSE} (scripts/setup.sh)")
    return WHEELHOUSE


def foreign_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of a `prime` subprocess: this checkout importable, no provider keys, its
    own settings and isolated environments, this virtualenv's bin off PATH, and uv told to find
    every package in the wheelhouse only (`UV_NO_INDEX`): nothing is downloaded."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith("_API_KEY") and not k.startswith(("PRIME_", "UV_", "PIP_"))
    }
    bin_dir = str(Path(sys.executable).parent)
    env.update(
        PYTHONPATH=str(ROOT),
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        UV_NO_INDEX="1",
        UV_FIND_LINKS=str(wheelhouse()),
        UV_PYTHON_DOWNLOADS="never",
        UV_CACHE_DIR=str(home / "uv-cache"),
        # as a `prime` run from an unactivated virtualenv: no uv on PATH (verifiers' harness
        # scripts get the runner's, never one verifiers would download)
        PATH=os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != bin_dir),
        NO_COLOR="1",
        COLUMNS="200",
    )
    env.update(extra)
    return env


def copy_project(name: str, dest: Path) -> Path:
    """A copy of tests/foreign/NAME to build and push (builds write into the project)."""
    target = dest / name
    shutil.copytree(FOREIGN / name, target, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    return target
