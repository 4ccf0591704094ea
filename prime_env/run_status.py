"""The status of a run on disk as a reader should believe it: `running` only while its owner lives.

WHY: a process killed with SIGKILL (the OOM killer, a reboot, `kill -9`) cannot write its last
status, so a file left saying `running` may describe a run that is long gone. The writer
therefore records who it is beside `running` (`status_fields`): pid, the process's start time
and the host (name + boot id, `sandbox.owner.Owner`), plus its pid namespace; every reader goes
through `read_status`, which says `interrupted` (the status a run stopped by a signal writes
itself) once that owner is provably gone. Eval runs (`metadata.json`) and `prime train` runs
(`run.json`) share this one rule.

What "provably gone" means (`owner_state`):
- another host, or another pid namespace of this one (a container), cannot be checked from
  here: `unknown`, and the status stays as written;
- this host name with another boot id: the machine rebooted since, so no process of the run
  survives (`gone`);
- this host and boot: the pid must still exist with the same start time, so a pid the kernel
  reused for another process is not mistaken for the run (and not be a zombie).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict
from functools import cache
from typing import Any, Literal

from sandbox.owner import Owner, host_id

# The statuses both kinds of run write (prime train's run.json also starts as `created`).
RUNNING = "running"
COMPLETED = "completed"
FAILED = "failed"  # an error stopped it; a resume continues once the cause is fixed
INTERRUPTED = "interrupted"  # a signal stopped it, or (read_status) its process is gone
OWNER = "owner"

OwnerState = Literal["alive", "gone", "unknown"]


@cache
def _pid_namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""  # no /proc (macOS): one namespace as far as we can tell


def status_fields(status: str) -> dict[str, Any]:
    """The fields to write for `status`: `running` names this process as its owner; any other
    status clears the owner (nobody is running the run any more)."""
    if status != RUNNING:
        return {"status": status, OWNER: None}
    return {"status": status, OWNER: asdict(Owner.current()) | {"pid_ns": _pid_namespace()}}


def owner_state(data: Mapping[str, Any]) -> OwnerState | None:
    """Whether the process recorded in `data` (a run.json or metadata.json) still runs; None when
    none is recorded (a finished run, or a file written before owners were)."""
    raw = data.get(OWNER)
    if not isinstance(raw, Mapping):
        return None
    try:
        owner = Owner(int(raw["pid"]), str(raw["start_time"]), str(raw["host"]))
    except (KeyError, TypeError, ValueError):
        return None  # a hand-edited owner is nobody we can check
    name, _, boot = owner.host.partition("/")
    here_name, _, here_boot = host_id().partition("/")
    if name != here_name or raw.get("pid_ns", "") != _pid_namespace():
        return "unknown"
    if boot != here_boot:
        return "gone"
    if not owner.start_time:  # written where /proc is missing: the pid is all there is
        return "alive" if _pid_exists(owner.pid) else "gone"
    return "alive" if owner.alive() and not _zombie(owner.pid) else "gone"


def process_running(pid: int) -> bool:
    """Whether `pid` exists (another user's process too) and is not a zombie."""
    return _pid_exists(pid) and not _zombie(pid)


def _zombie(pid: int) -> bool:
    """An exited process its parent has not reaped yet (a script's Popen never waited on) keeps
    its pid and start time, but runs nothing."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except (OSError, IndexError):
        return False


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def held_by_another(data: Mapping[str, Any]) -> bool:
    """Whether another live process on this host still runs the run (resuming it now would run
    it twice); this process's own run, and one that cannot be checked, are not held."""
    raw = data.get(OWNER)
    if data.get("status") != RUNNING or not isinstance(raw, Mapping):
        return False
    mine = status_fields(RUNNING)[OWNER]
    return owner_state(data) == "alive" and any(raw.get(k) != mine[k] for k in mine)


def read_status(data: Mapping[str, Any]) -> str | None:
    """The status to report for a run whose file holds `data`: as written, except that
    `running` whose owner is gone reads `interrupted`."""
    status = data.get("status")
    if status == RUNNING and owner_state(data) == "gone":
        return INTERRUPTED
    return None if status is None else str(status)


def describe_owner(data: Mapping[str, Any]) -> str:
    """`pid N on HOST`, for messages about a run that is still running."""
    raw = data.get(OWNER)
    if not isinstance(raw, Mapping):
        return "an unknown process"
    return f"pid {raw.get('pid')} on {str(raw.get('host', '?')).partition('/')[0]}"
