"""The unisolated backend: the local sandbox without bubblewrap, for code the user trusts.

Programs still run with the supervisor as PID 1 of a PID namespace of its own (util-linux
`unshare`, root only), under a uid of their own, in a cgroup and an IPC namespace, with
size-limited tmpfs work and temp directories, but they see the host's whole filesystem: every
world-readable file (tokens, an environment's reference solutions), and every world-writable
directory (`/var/tmp`, `/dev/shm`), which no reset empties. That is why `auto` never picks it by itself: it runs only when named
(`backend="unisolated"`) or allowed (`PRIME_SANDBOX_ALLOW_UNISOLATED=1`; see sandbox/factory.py).
"""

from __future__ import annotations

import os
from pathlib import Path

from sandbox.backends.local import SUPERVISOR_CAPS, LocalSandbox
from sandbox.errors import SandboxUnavailable

# Mounts the size-limited work and temp directories inside `unshare`'s mount namespace, then
# runs the rest of its argv.
_MOUNT_TMPFS = (
    'mount -t tmpfs -o "size=$3,mode=1777,nosuid,nodev" tmpfs "$1" && '
    'mount -t tmpfs -o "size=$3,mode=1777,nosuid,nodev" tmpfs "$2" && shift 3 && exec "$@"'
)


class UnisolatedSandbox(LocalSandbox):
    """A local sandbox that hides nothing of the host (see the module docstring)."""

    backend = "unisolated"

    def _refuse_if_unavailable(self) -> None:
        if self.binds or self.writable_dirs:
            raise SandboxUnavailable(
                "the unisolated backend cannot bind host directories or mount writable ones "
                "into the sandbox: use the local backend (bubblewrap) or Docker"
            )
        if os.geteuid() != 0:
            raise SandboxUnavailable(
                "the unisolated backend needs root (util-linux unshare keeps programs away from "
                "its supervisor); without root, install bubblewrap for the local backend"
            )

    @property
    def scratch_dirs(self) -> tuple[str, ...]:
        return (self.workdir, self.tmpdir)  # and the host's world-writable directories

    def _namespace_argv(self, as_root: bool, work: Path, tmp: Path, tmpfs_bytes: int) -> list[str]:
        self.workdir, self.tmpdir = str(work), str(tmp)
        return [
            *("unshare", "--pid", "--fork", "--mount", "--mount-proc", "--ipc", "--kill-child"),
            "--",
            *("/bin/sh", "-c", _MOUNT_TMPFS, "sh", str(work), str(tmp), str(tmpfs_bytes)),
            *("setpriv", "--no-new-privs", "--inh-caps=-all"),
            "--bounding-set=-all," + ",".join("+" + c[4:].lower() for c in SUPERVISOR_CAPS),
            "--",
        ]
