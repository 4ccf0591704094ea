"""Directories handed between processes: written aside, renamed into place, `STABLE` last.

Batches, policy broadcasts and checkpoints all cross a process boundary through the run dir.
A reader trusts a `step_N/` directory only once its `STABLE` marker exists, so a crash while
writing never leaves something that looks complete (prime-rl#1712, #1825).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from registry_index.files import write_atomic

MARKER = "STABLE"
_STEP = re.compile(r"^step_(\d+)$")


def step_dir(parent: Path, step: int) -> Path:
    return parent / f"step_{step}"


def is_stable(path: Path) -> bool:
    return (path / MARKER).is_file()


@contextmanager
def stable_dir(final: Path, *, overwrite: bool = False) -> Iterator[Path]:
    """Yield a scratch directory beside `final`; on success rename it to `final` and write
    `STABLE` in it last. On an exception the scratch directory is removed and `final` is
    untouched. An existing stable `final` is refused unless `overwrite`; an unstable one (a
    crash between rename and marker) is always replaced."""
    final.parent.mkdir(parents=True, exist_ok=True)
    if is_stable(final) and not overwrite:
        raise FileExistsError(f"{final} is already complete (STABLE); refusing to replace it")
    scratch = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        yield scratch
        if final.exists():
            shutil.rmtree(final)
        os.rename(scratch, final)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    write_atomic(final / MARKER, "")


def stable_steps(parent: Path) -> list[int]:
    """The steps N with a stable `parent/step_N/`, ascending."""
    if not parent.is_dir():
        return []
    steps = []
    for child in parent.iterdir():
        match = _STEP.match(child.name)
        if match and is_stable(child):
            steps.append(int(match.group(1)))
    return sorted(steps)


def prune(parent: Path, keep_last: int) -> None:
    """Remove all but the newest `keep_last` stable step directories (never an unstable one:
    it may be being written)."""
    steps = stable_steps(parent)
    for step in steps[: max(len(steps) - keep_last, 0)]:
        shutil.rmtree(step_dir(parent, step), ignore_errors=True)
