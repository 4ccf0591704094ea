"""How the project's small files are written and read: whole or not at all, torn lines forgiven.

One home for the rules every run directory, settings file and export relies on:
- a write goes to a scratch file (or directory) beside the target and is renamed over it
  (POSIX rename is atomic), so a reader, or a process restarted after SIGKILL, sees the old file or the new one,
  never a torn one; the scratch file is removed when the write fails;
- a JSONL file appended to by a process that may be killed is read leniently: a line that is not
  JSON (the torn last line of a crash) is skipped, not fatal;
- a path component made of an env or model id (`slug`), a run's name checked to be one
  (`check_run_name`), and the UTC time stamps files carry.
The hub's blob store keeps its own, durable writes (it fsyncs the directory too).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO


@contextmanager
def atomic_writer(
    path: Path, *, mode: int | None = None, durable: bool = False
) -> Iterator[TextIO]:
    """A text handle (UTF-8) whose content replaces `path` all at once when the block ends
    without an exception (parents made); on an exception `path` is untouched. `mode` sets the
    file's permission bits before any byte is written (a secret is never readable by others,
    not even for a moment); `durable` fsyncs the data before the rename and the directory after it,
    for a file that must survive a power loss (settings with a token), not just a kill."""
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666 if mode is None else mode)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            if mode is not None:
                os.fchmod(handle.fileno(), mode)  # the umask may have narrowed it; set it exactly
            yield handle
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(scratch, path)
    except BaseException:
        scratch.unlink(missing_ok=True)
        raise
    if durable:  # the rename itself: POSIX keeps it in the directory's entry
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


@contextmanager
def atomic_directory(dest: Path) -> Iterator[Path]:
    """A scratch directory beside `dest` (which must be absent or empty) to fill; when the block
    ends without an exception it is renamed to `dest`, else removed: `dest` appears whole or not
    at all (a scaffold, an extracted archive, an imported task directory)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = dest.parent / f".{dest.name}.{uuid.uuid4().hex}.tmp"
    staging.mkdir()
    try:
        yield staging
        if dest.exists():
            dest.rmdir()
        staging.rename(dest)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def write_atomic(path: Path, text: str, *, mode: int | None = None, durable: bool = False) -> None:
    """Replace `path` with `text` all at once, as `atomic_writer` does."""
    with atomic_writer(path, mode=mode, durable=durable) as handle:
        handle.write(text)


def write_json_atomic(path: Path, payload: Any) -> None:
    """`payload` as indented JSON and a final newline, written as `atomic_writer` does."""
    write_atomic(path, json.dumps(payload, indent=2) + "\n")


def write_lines_atomic(path: Path, lines: Iterable[str]) -> int:
    """One line per item (a newline after each), streamed: a JSONL file rewritten whole, as
    `atomic_writer` does. Returns how many lines."""
    written = 0
    with atomic_writer(path) as handle:
        for line in lines:
            handle.write(line + "\n")
            written += 1
    return written


def read_jsonl(path: Path) -> list[Any]:
    """The JSON values of a JSONL file, in order; a line that does not parse (the torn last
    line of a killed writer) is skipped, and a missing file reads as empty."""
    if not path.is_file():
        return []
    rows: list[Any] = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue
    return rows


def slug(text: str) -> str:
    """A path component for an env or model id: `prime/arithmetic@0.1` → `prime--arithmetic-0.1`,
    `./envs/x.py` → `envs--x.py`; anything but letters, digits, `.`, `_` and `-` becomes `_`."""
    joined = text.lstrip("./~").replace("/", "--").replace("@", "-")
    return re.sub(r"[^A-Za-z0-9._-]+", "_", joined)


_RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def check_run_name(name: str) -> str:
    """`name` if it can be a run's directory: one path component of letters, digits, '.',
    '_' and '-', starting with a letter or digit (no `/`, `..` or absolute path that would put
    the run outside its output directory); ValueError saying so otherwise."""
    if _RUN_NAME.fullmatch(name) is None:
        raise ValueError(
            f"run name {name[:80]!r} is not one path component: use up to 128 letters, digits, "
            "'.', '_' and '-', starting with a letter or digit"
        )
    return name


def utc_now() -> str:
    """Now, as run files stamp it: UTC to the second, `2026-12-04T09:30:00Z`."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
