"""The local backend: bubblewrap, the supervisor as PID 1, programs under a uid of their own.

Every local sandbox (documented, with what is weaker than Docker, in docs/sandbox.md):
- the supervisor is PID 1 of a new PID namespace made by bubblewrap (`UnisolatedSandbox`, in
  unisolated.py, makes it with util-linux `unshare` and hides nothing of the host), so nothing
  inside can signal it and killing the namespace's processes after each command is exact:
  setsid, double forks and daemons die with the command;
- as root: the supervisor keeps only CAP_SETUID, CAP_SETGID and CAP_KILL, and programs run
  under a uid of their own per sandbox (no capabilities; RLIMIT_NPROC is enforced for it);
- /work, /tmp and /dev/shm are size-limited tmpfs mounts inside the sandbox's mount namespace
  (the disk quota: nothing a program writes reaches the host's disk), /dev is read-only;
- as root, a cgroup per sandbox (sandbox/cgroups.py) limits memory and processes for the whole
  tree; elsewhere only per-process RLIMIT_AS holds;
- bubblewrap also gives new user (unless root), net, ipc and uts namespaces and a read-only view
  of the system directories only, with every Python site-packages directory under them empty
  (an environment installed into the system Python must not show its reference solutions);
- a claim file per sandbox, so the reaper can clean up after an owner that was SIGKILLed.
"""

from __future__ import annotations

import glob
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from sandbox import supervisor
from sandbox.backends.base import HOME, Sandbox, SandboxRow
from sandbox.cgroups import SandboxCgroup
from sandbox.channel import Channel, PipeChannel
from sandbox.errors import SandboxError, SandboxUnavailable
from sandbox.limits import SandboxLimits
from sandbox.owner import Owner

# Private uids for local sandboxes: far above any uid a distribution hands out.
UID_BASE = 2_100_000_000
UID_COUNT = 1_000_000
_SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC_FILES = (
    "/etc/alternatives",
    "/etc/ld.so.cache",
    "/etc/localtime",
    "/etc/ssl",
    "/etc/mime.types",
)


INSTALL_BWRAP = "`apt-get install bubblewrap` (Debian, Ubuntu; `dnf install bubblewrap` on Fedora)"
# Python's package directories under the system paths: emptied in the sandbox's view.
_SITE_PACKAGES = ("/usr/lib*/python3*/*-packages", "/usr/local/lib*/python3*/*-packages")


@cache
def bwrap_path() -> str | None:
    """bubblewrap, when installed and able to create namespaces here."""
    path = shutil.which("bwrap")
    if path is None:
        return None
    probe = subprocess.run(
        [path, "--unshare-all", "--ro-bind", "/", "/", "--", "/bin/true"],
        capture_output=True,
        check=False,
    )
    return path if probe.returncode == 0 else None


def bwrap_problem() -> str | None:
    """Why the local backend cannot run here, or None when bubblewrap is usable."""
    if shutil.which("bwrap") is None:
        return "bubblewrap is not installed"
    if bwrap_path() is None:
        return "bubblewrap cannot create namespaces here (are user namespaces disabled?)"
    return None


def state_dir() -> Path:
    """Where claim files live: one per running local sandbox, named by its uid."""
    base = Path(
        os.environ.get(
            "PRIME_SANDBOX_STATE", Path(tempfile.gettempdir()) / f"prime-sandbox-{os.getuid()}"
        )
    )
    base.mkdir(mode=0o700, parents=True, exist_ok=True)
    return base


def _python() -> str:
    # The system interpreter: under bwrap only /usr is visible, and a virtualenv may live in $HOME.
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.access(candidate, os.X_OK):
            return candidate
    return sys.executable


@dataclass(frozen=True)
class _Claim:
    uid: int | None
    root: Path
    owner: Owner
    cgroup: SandboxCgroup | None = None
    backend: str = "local"


def _write_claim(claim: _Claim) -> Path:
    path = state_dir() / f"{claim.uid if claim.uid is not None else 'u'}-{claim.root.name}"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(
            f"{claim.uid if claim.uid is not None else ''}\n{claim.root}\n{claim.owner.encode()}\n"
            f"{claim.cgroup.encode() if claim.cgroup else ''}\n{claim.backend}\n"
        )
    return path


def _read_claim(path: Path) -> _Claim | None:
    try:
        uid, root, owner, cgroup, backend = (path.read_text().splitlines() + ["", ""])[:5]
        return _Claim(
            int(uid) if uid else None,
            Path(root),
            Owner.decode(owner),
            SandboxCgroup.decode(cgroup),
            backend or "local",
        )
    except (OSError, ValueError):
        return None


def _allocate_uid() -> int:
    taken = {path.name.split("-", 1)[0] for path in state_dir().iterdir()}
    for _ in range(1000):
        uid = UID_BASE + random.randrange(UID_COUNT)
        if str(uid) not in taken:
            return uid
    raise SandboxError("no free sandbox uid (too many local sandboxes; run `prime sandbox gc`)")


def processes_of(uid: int) -> list[int]:
    """Live (non-zombie) pids owned by `uid`."""
    pids = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid != uid:
                continue
            with open(f"/proc/{entry.name}/stat", "rb") as handle:
                state = handle.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != b"Z":
            pids.append(int(entry.name))
    return pids


def kill_uid(uid: int) -> None:
    """Kill every process of a sandbox uid, including ones that forked or left their group."""
    for _ in range(50):
        if not processes_of(uid):
            return
        # kill(-1) run *as* that uid reaches exactly that uid's processes (and spares the caller).
        subprocess.run(
            ["kill", "-9", "-1"],
            user=uid,
            group=uid,
            extra_groups=[],
            capture_output=True,
            check=False,
        )
        time.sleep(0.01)
    raise SandboxError(f"could not kill the processes of sandbox uid {uid}")


def _release(claim_path: Path, claim: _Claim) -> None:
    if claim.uid is not None:
        kill_uid(claim.uid)
    if claim.cgroup is not None:
        try:
            claim.cgroup.remove()
        except OSError as exc:
            raise SandboxError(f"cannot remove the sandbox's cgroup: {exc}") from exc
    shutil.rmtree(claim.root, ignore_errors=True)
    claim_path.unlink(missing_ok=True)


SUPERVISOR_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_KILL")


class LocalSandbox(Sandbox):
    """A sandbox made of a supervisor subprocess on this machine (see the module docstring)."""

    backend = "local"

    def __init__(
        self,
        limits: SandboxLimits | None = None,
        env: dict[str, str] | None = None,
        binds: dict[str, str] | None = None,
        writable_dirs: Sequence[str] | None = None,
    ) -> None:
        super().__init__(limits, env, binds, writable_dirs)
        self._refuse_if_unavailable()
        self.uid: int | None = None
        self.root: Path | None = None
        self.cgroup: SandboxCgroup | None = None
        self._claim_path: Path | None = None
        self._claim: _Claim | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    def _refuse_if_unavailable(self) -> None:
        problem = bwrap_problem()
        if problem is not None:
            raise SandboxUnavailable(
                f"the local backend needs bubblewrap, and {problem}: install it with "
                f"{INSTALL_BWRAP}, or use Docker"
            )

    @classmethod
    def list_sandboxes(cls) -> list[SandboxRow]:
        rows = []
        for path in sorted(state_dir().iterdir()):
            claim = _read_claim(path)
            if claim is not None:
                rows.append(
                    {
                        "backend": claim.backend,
                        "id": claim.root.name,
                        "owner_pid": str(claim.owner.pid),
                        "status": "running" if claim.owner.alive() else "orphaned",
                        "uid": str(claim.uid or ""),
                    }
                )
        return rows

    @classmethod
    def cleanup(cls, sandbox_id: str) -> None:
        """Kill the sandbox's processes, remove its cgroup and files, then its claim."""
        for path in state_dir().iterdir():
            claim = _read_claim(path)
            if claim is not None and claim.root.name == sandbox_id:
                _release(path, claim)

    @classmethod
    def reap_orphans(cls) -> int:
        reaped = 0
        for path in state_dir().iterdir():
            claim = _read_claim(path)
            if claim is None or claim.owner.alive():
                continue
            try:
                cls.cleanup(claim.root.name)
            except SandboxError:
                continue  # one stuck orphan must not stop new sandboxes; `gc` retries
            reaped += 1
        return reaped

    def _launch(self) -> Channel:
        self.reap_orphans()
        as_root = os.geteuid() == 0
        limits = self.limits
        self.root = Path(tempfile.mkdtemp(prefix="prime-sbx-"))
        self.root.chmod(0o711)  # unisolated, the programs' uid reaches work/ through it
        self.id = self.root.name
        self.uid = _allocate_uid() if as_root else None
        self.cgroup = SandboxCgroup.create(self.id, limits.memory_mb << 20, limits.pids)
        self._claim = _Claim(self.uid, self.root, Owner.current(), self.cgroup, self.backend)
        self._claim_path = _write_claim(self._claim)
        work, tmp = self.root / "work", self.root / "tmp"
        for path in (work, tmp):
            path.mkdir(mode=0o755)
        prefix = self._namespace_argv(as_root, work, tmp, limits.workdir_mb << 20)
        cgroup_fds = [
            os.open(path, os.O_WRONLY)
            for path in (self.cgroup.procs_files() if self.cgroup else [])
        ]
        argv = [*prefix, *supervisor.command(
            _python(), self.workdir, self.scratch_dirs, limits.ttl_s,
            limits.child_rlimits(address_space=True, processes=as_root),
            f"{self.uid}:{self.uid}" if self.uid is not None else "", cgroup_fds,
        )]  # fmt: skip
        # Limits and parent-death signal by util-linux wrappers rather than a preexec_fn, which
        # is unsafe in a threaded host (the pool runs sandboxes from worker threads).
        confine = [
            *("setpriv", "--pdeathsig", "KILL", "--", "prlimit"),
            f"--fsize={limits.file_size_mb << 20}",
            f"--nofile={limits.nofile}",
            "--core=0",
            "--",
        ]
        try:
            self._proc = subprocess.Popen(
                [*confine, *argv],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env={
                    "PATH": "/usr/bin:/bin:/usr/sbin:/sbin",
                    "LANG": "C.UTF-8",
                    "TMPDIR": self.tmpdir,
                    "HOME": HOME,
                },
                cwd=str(self.root),
                start_new_session=True,
                pass_fds=cgroup_fds,
            )
        except OSError as exc:
            raise SandboxError(f"cannot start the local sandbox supervisor: {exc}") from exc
        finally:
            for fd in cgroup_fds:
                os.close(fd)
        assert self._proc.stdin and self._proc.stdout and self._proc.stderr
        return PipeChannel(
            os.dup(self._proc.stdin.fileno()),
            os.dup(self._proc.stdout.fileno()),
            os.dup(self._proc.stderr.fileno()),
        )

    def _namespace_argv(self, as_root: bool, work: Path, tmp: Path, tmpfs_bytes: int) -> list[str]:
        """The command that makes the sandbox's namespaces and runs the rest of the argv in them
        (bubblewrap here; `UnisolatedSandbox` uses `unshare`)."""
        self.workdir, self.tmpdir = "/work", "/tmp"
        bwrap = bwrap_path()
        assert bwrap is not None
        # As root no user namespace: real uids, so programs run under a uid of their own, and
        # the supervisor keeps three capabilities. Without root: a user namespace, one uid.
        namespaces = ["--unshare-user"] if not as_root else []
        namespaces += ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts"]
        caps = ["--cap-drop", "ALL"]
        for cap in SUPERVISOR_CAPS if as_root else ():
            caps += ["--cap-add", cap]
        argv = [
            bwrap,
            *namespaces,
            "--as-pid-1",
            "--die-with-parent",
            "--new-session",
            *caps,
            "--hostname",
            "sandbox",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            # As in Docker: a size-limited /dev/shm and the IPC namespace's message queues.
            *("--perms", "1777", "--size", str(self.limits.shm_mb << 20), "--tmpfs", "/dev/shm"),
            *("--mqueue", "/dev/mqueue"),
        ]
        for path in _SYSTEM_PATHS:
            if os.path.islink(path):
                argv += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                argv += ["--ro-bind", path, path]
        for path in _ETC_FILES:
            if os.path.exists(path):
                argv += ["--ro-bind", path, path]
        assert self.root is not None
        empty = self.root / "empty"
        empty.mkdir(mode=0o555)
        for pattern in _SITE_PACKAGES:
            for path in sorted(glob.glob(pattern)):
                if os.path.isdir(path) and not os.path.islink(path):
                    argv += ["--ro-bind", str(empty), path]
        for path in ("/work", "/tmp", *self.writable_dirs):
            argv += ["--perms", "1777", "--size", str(tmpfs_bytes), "--tmpfs", path]
        for host, target in self.binds.items():
            parents = Path(target).parents
            for parent in reversed([str(p) for p in parents if str(p) != "/"]):
                argv += ["--perms", "0755", "--dir", parent]  # bwrap makes them 0700 otherwise
            argv += ["--ro-bind", host, target]
        # /dev itself is an unbounded tmpfs, owned by the programs' uid without root.
        argv += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", "/work", "--"]
        return argv

    def _describe_death(self) -> str:
        proc, channel = self._proc, self._channel  # a `stop` on another thread clears both
        if proc is None:
            return ""
        code = proc.poll()
        stderr = channel.diagnostics() if channel is not None else ""
        state = (
            "still running but not answering"
            if code is None
            else f"supervisor exited with status {code}"
        )
        return f"{state}. {stderr.strip()[-2000:]}".strip()

    def _destroy(self) -> None:
        if self._proc is not None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self._proc.wait()
            for stream in (self._proc.stdin, self._proc.stdout, self._proc.stderr):
                if stream is not None:
                    stream.close()
            self._proc = None
        if self._claim_path is not None and self._claim is not None:
            _release(self._claim_path, self._claim)
            self._claim_path = None
        elif self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
