"""Who owns a sandbox, and whether that owner is still alive.

WHY pid + start time + boot id: a pid alone is reused after the owner dies, and a remote
Docker host is shared by many machines; the reaper must only remove sandboxes whose owner is
provably gone from this machine.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from functools import cache


def _start_time(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    # Field 22 (starttime); the command name (field 2) may contain spaces, so split after ')'.
    return stat.rsplit(b")", 1)[1].split()[19].decode()


@cache
def host_id() -> str:
    """This machine and boot: a container labelled with another host id is never reaped here."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as handle:
            boot = handle.read().strip()
    except OSError:
        boot = "unknown-boot"
    return f"{socket.gethostname()}/{boot}"


@dataclass(frozen=True)
class Owner:
    pid: int
    start_time: str
    host: str

    @classmethod
    def current(cls) -> Owner:
        return cls(os.getpid(), _start_time(os.getpid()) or "", host_id())

    def alive(self) -> bool:
        """True unless the owner is on this host and its process is gone (or the pid reused)."""
        if self.host != host_id():
            return True
        return _start_time(self.pid) == self.start_time

    def encode(self) -> str:
        return f"{self.pid}:{self.start_time}:{self.host}"

    @classmethod
    def decode(cls, text: str) -> Owner:
        pid, start, host = text.split(":", 2)
        return cls(int(pid), start, host)
