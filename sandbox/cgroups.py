"""One memory and process limit for a local sandbox's whole process tree, by cgroup.

WHY: rlimits are per process (RLIMIT_AS) or per uid (RLIMIT_NPROC), so six processes of 200 MB
each pass a 256 MB RLIMIT_AS. A cgroup charges every process of the sandbox, and the tmpfs pages
they write, against one limit, as Docker does for a container. It needs root and either cgroup
v2 with the memory and pids controllers delegated to the host process's cgroup, or cgroup v1
with the memory and pids hierarchies mounted. Sandbox cgroups are created below the host
process's own, so they also count against whatever limit the host runs under. The supervisor
stays outside: only the programs join (through a `cgroup.procs` file it inherits open), so the
OOM killer can never pick it.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
_CONTROLLERS = ("memory", "pids")


def _own_path(hierarchy: str) -> str | None:
    """This process's cgroup path in a v1 hierarchy ('memory', 'pids') or v2 ('')."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if (hierarchy == "" and controllers == "" and line.startswith("0::")) or (
            hierarchy and hierarchy in controllers.split(",")
        ):
            return path
    return None


def _parents() -> list[Path] | None:
    """Where sandbox cgroups go: one directory per hierarchy, or None where none is usable."""
    if os.geteuid() != 0:
        return None
    if (ROOT / "cgroup.controllers").exists():  # v2 mounted at the root: one hierarchy
        own = _own_path("")
        if own is None:
            return None
        parent = ROOT / own.lstrip("/")
        try:
            enabled = (parent / "cgroup.subtree_control").read_text().split()
            missing = [name for name in _CONTROLLERS if name not in enabled]
            if missing:
                # Fails (EBUSY) when the host's cgroup has processes of its own and is not the
                # root: then the controllers were not delegated and there is nothing to use.
                (parent / "cgroup.subtree_control").write_text(
                    " ".join(f"+{name}" for name in missing)
                )
        except OSError:
            return None
        return [parent]
    parents = []
    for name in _CONTROLLERS:
        own = _own_path(name)
        if own is None or not (ROOT / name / "cgroup.procs").exists():
            return None
        parents.append(ROOT / name / own.lstrip("/"))
    return parents


@dataclass(frozen=True)
class SandboxCgroup:
    """The cgroup directories of one sandbox (v2: one; v1: memory and pids)."""

    paths: tuple[Path, ...]

    @classmethod
    def create(cls, name: str, memory_bytes: int, pids: int) -> SandboxCgroup | None:
        """Make and limit the sandbox's cgroups; None where this host offers none (see module)."""
        parents = _parents()
        if parents is None:
            return None
        made: list[Path] = []
        try:
            for parent in parents:
                path = parent / name
                path.mkdir()
                made.append(path)
            group = cls(tuple(made))
            group._limit(memory_bytes, pids)
        except OSError:
            cls(tuple(made)).remove()
            return None
        return group

    def _limit(self, memory_bytes: int, pids: int) -> None:
        for path in self.paths:
            settings = {
                # v2: no swap either, so the limit is the limit.
                "memory.max": str(memory_bytes),
                "memory.swap.max": "0",
                # v1: the memory+swap limit must be raised after (never below) the memory limit.
                "memory.limit_in_bytes": str(memory_bytes),
                "memory.memsw.limit_in_bytes": str(memory_bytes),
                "pids.max": str(pids),
            }
            for file, value in settings.items():
                if (path / file).exists():
                    (path / file).write_text(value)

    def procs_files(self) -> list[Path]:
        """The files a process writes "0" to in order to join (opened by the host, inherited)."""
        return [path / "cgroup.procs" for path in self.paths]

    def peak_memory(self) -> int:
        """The most memory the sandbox's programs held at once, in bytes (for tests and reports)."""
        for path in self.paths:
            for file in ("memory.peak", "memory.max_usage_in_bytes"):
                if (path / file).exists():
                    return int((path / file).read_text())
        return 0

    def remove(self, within_s: float = 10.0) -> None:
        """Kill whatever is still inside and delete the cgroups."""
        deadline = time.monotonic() + within_s
        for path in self.paths:
            while path.exists():
                try:
                    path.rmdir()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                for pid in _members(path):
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                time.sleep(0.01)

    def encode(self) -> str:
        return ";".join(str(path) for path in self.paths)

    @classmethod
    def decode(cls, text: str) -> SandboxCgroup | None:
        paths = tuple(Path(item) for item in text.split(";") if item)
        if not all(
            path.is_relative_to(ROOT) and path.name.startswith("prime-sbx-") for path in paths
        ):
            raise ValueError(f"not a sandbox cgroup: {text!r}")
        return cls(paths) if paths else None


def _members(path: Path) -> list[int]:
    try:
        return [int(pid) for pid in (path / "cgroup.procs").read_text().split()]
    except OSError:
        return []
