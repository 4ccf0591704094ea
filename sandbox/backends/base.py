"""The `Sandbox` API every backend implements: start, exec, files, reset, stop, and the class
methods that list, clean up and reap a backend's sandboxes on this machine.

WHY one base class: both backends launch the same supervisor (sandbox/supervisor.py) and differ only
in how they start it, wire its stdin/stdout and clean it up. Everything else (requests,
timeouts, size caps, and deciding whose failure a dead supervisor is: the running command's,
or the infrastructure's `SandboxError`) lives here once.
"""

from __future__ import annotations

import io
import itertools
import os
import threading
import time
import zipfile
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from sandbox.channel import Channel
from sandbox.errors import SandboxError
from sandbox.limits import SandboxLimits
from sandbox.result import ExecResult
from sandbox.supervisor import decode, encode, pack_list

# Extra seconds the host waits past a command's own timeout before it declares the supervisor hung.
_GRACE_S = 10.0
# How long starting (launch + first answer) may take.
_START_TIMEOUT_S = 60.0
_SUPERVISOR_ERRORS: dict[str, type[Exception]] = {
    "FileNotFoundError": FileNotFoundError,
    "IsADirectoryError": IsADirectoryError,
    "NotADirectoryError": NotADirectoryError,
    "PermissionError": PermissionError,
    "FileExistsError": FileExistsError,
    "ValueError": ValueError,
    "BadZipFile": ValueError,
    "OSError": OSError,
}

# Programs' HOME: a path no program can create (the root filesystem is read-only, or the host's
# own), so no per-user startup file (Python's user site, dotfiles) can wait there for a later
# command. Debian's home for `nobody`, the programs' user in the Docker image.
HOME = "/nonexistent"

Command = str | Sequence[str]
SandboxRow = dict[str, str]
"""One listed sandbox: `backend`, `id`, `owner_pid`, `status` ("orphaned" once its owner is
gone), and whatever else its backend knows (image, run id, uid)."""


def check_binds(binds: Mapping[str, str] | None) -> dict[str, str]:
    """Read-only bind mounts, checked: existing host directories onto absolute paths outside
    the sandbox's own work and temp directories."""
    checked: dict[str, str] = {}
    for host, target in (binds or {}).items():
        if not os.path.isdir(host):
            raise ValueError(f"bind source {host!r} is not a directory on this machine")
        if os.stat(host).st_mode & 0o005 != 0o005:
            raise ValueError(
                f"bind source {host!r} is not readable by the sandbox's programs, which run "
                f"under a uid of their own: chmod o+rx {host}"
            )
        if (
            not target.startswith("/")
            or target.rstrip("/") in ("", "/work", "/tmp")
            or any(target.startswith(p) for p in ("/work/", "/tmp/", "/proc", "/dev"))
        ):
            raise ValueError(
                f"bind target {target!r} must be an absolute path outside /, /work, /tmp, "
                "/proc and /dev (e.g. /opt/agent)"
            )
        checked[os.path.realpath(host)] = target.rstrip("/")
    return checked


RESERVED_PATHS = ("/work", "/tmp", "/proc", "/dev", "/sys", "/usr", "/bin", "/sbin", "/lib",
                  "/lib32", "/lib64", "/etc")  # fmt: skip
"""Where no extra writable directory may go: the sandbox's own scratch places, and what the
programs and the supervisor run from."""


def check_writable_dirs(dirs: Sequence[str] | None) -> tuple[str, ...]:
    """Extra writable directories, checked: absolute, distinct, outside `RESERVED_PATHS`, none
    inside another (e.g. `/logs`, `/app`, the places a task's scripts expect to write)."""
    checked: list[str] = []
    for raw in dirs or ():
        path = os.path.normpath(raw) if raw.startswith("/") else ""
        if (
            not path
            or path == "/"
            or any(path == r or path.startswith(r + "/") for r in RESERVED_PATHS)
            or "\0" in path
            or ":" in path
        ):
            raise ValueError(
                f"writable directory {raw!r} must be an absolute path outside /, "
                f"{', '.join(RESERVED_PATHS)} (e.g. /logs or /app), without ':'"
            )
        if any(path == c or path.startswith(c + "/") or c.startswith(path + "/") for c in checked):
            raise ValueError(f"writable directory {raw!r} repeats or nests in another one")
        checked.append(path)
    return tuple(checked)


class _BroughtDownByProgram(Exception):
    """The sandbox died or hung while a program ran: exec reports it as the program's failure."""

    def __init__(self, detail: str, hung: bool) -> None:
        super().__init__(detail)
        self.detail = detail
        self.hung = hung


class Sandbox(ABC):
    """One isolated place to run untrusted commands. Use as `with open_sandbox() as sb: ...`.

    Methods are blocking and serialised per sandbox; `AsyncSandbox` wraps one for asyncio.
    Program failures come back as `ExecResult`; infrastructure failures raise `SandboxError`.
    """

    backend: str = ""
    workdir: str = "/work"
    tmpdir: str = "/tmp"

    def __init__(
        self,
        limits: SandboxLimits | None = None,
        env: Mapping[str, str] | None = None,
        binds: Mapping[str, str] | None = None,
        writable_dirs: Sequence[str] | None = None,
    ):
        self.limits = limits or SandboxLimits()
        self.env = dict(env or {})
        self.binds = check_binds(binds)
        """Host directory -> absolute path in the sandbox, mounted read-only (e.g. a program's
        dependencies, or the directory of a Unix socket its calls leave through)."""
        self.writable_dirs = check_writable_dirs(writable_dirs)
        """Directories beyond the work and temp ones where programs may write (a task's
        `/logs`, `/app`): size-limited like them, emptied by `reset` like them."""
        for target in self.binds.values():
            if any(target == w or target.startswith(w + "/") for w in self.writable_dirs):
                raise ValueError(f"bind target {target!r} lies in a writable directory")
        self.id = ""
        self._channel: Channel | None = None
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._dead: str | None = None
        # Set when a program brought the sandbox down: the next call starts a fresh one.
        self._brought_down: str | None = None
        self._closing = False

    # -- every sandbox of this backend on this machine (`prime sandbox ls`, `gc`) -------------
    @classmethod
    @abstractmethod
    def list_sandboxes(cls) -> list[SandboxRow]:
        """The backend's sandboxes on this machine, this process's and everyone else's."""

    @classmethod
    @abstractmethod
    def cleanup(cls, sandbox_id: str) -> None:
        """Remove the sandbox `sandbox_id` (as listed) and everything it holds; nothing happens
        when it is already gone, and `SandboxError` says what could not be removed."""

    @classmethod
    @abstractmethod
    def reap_orphans(cls) -> int:
        """`cleanup` every sandbox whose owner is gone (or whose lifetime passed); returns how
        many. Each start runs it, since an owner killed with SIGKILL cannot stop its own."""

    # -- lifecycle ---------------------------------------------------------------------------
    @abstractmethod
    def _launch(self) -> Channel:
        """Start the supervisor and return a channel to it."""

    @abstractmethod
    def _destroy(self) -> None:
        """Remove everything the sandbox holds; must be safe to call twice and after a failure."""

    @abstractmethod
    def _describe_death(self) -> str:
        """Why the sandbox stopped answering, for the SandboxError message."""

    def start(self) -> Self:
        """Launch the sandbox and wait until its supervisor answers."""
        if self._channel is not None:
            return self
        try:
            self._channel = self._launch()
            hello = self._call({"op": "ping"}, _START_TIMEOUT_S)
            if not hello.get("sealed"):
                raise SandboxError(
                    f"the {self.backend} sandbox's Python cannot protect the supervisor's channel "
                    "from the programs it runs (no ctypes / prctl): use an image with Debian's "
                    "full `python3` (prime sandbox build-image)"
                )
            if hello.get("pid") != 1:
                raise SandboxError(
                    f"the {self.backend} sandbox's supervisor is not PID 1 of its own PID "
                    "namespace, so programs could signal it; this backend cannot run here"
                )
            self._seed()
        except BaseException:
            self.stop()
            raise
        self._dead = None
        self._closing = False
        return self

    def stop(self) -> None:
        """Kill everything in the sandbox and remove it. Idempotent; safe while a call runs."""
        self._closing = True  # a command this interrupts failed because of us, not the program
        # Destroy first: a call in flight then reads EOF at once and lets go of the channel,
        # which is closed only after that (closing it under a reader could hand its descriptor
        # number to another socket while the reader still waits on it).
        self._destroy()
        locked = self._lock.acquire(timeout=_GRACE_S)
        try:
            channel, self._channel = self._channel, None
            if channel is not None:
                channel.close()
        finally:
            if locked:
                self._lock.release()
        self._dead = self._dead or "stopped"

    def _seed(self) -> None:
        """Put into the writable directories what the sandbox's image holds at those paths
        (Docker: a task's files under its WORKDIR); nothing where there is no image."""

    @property
    def scratch_dirs(self) -> tuple[str, ...]:
        """Every place in the sandbox a program can write: each has a size limit, and `reset`
        empties them all (the work directory first, as the supervisor is told)."""
        return (self.workdir, self.tmpdir, "/dev/shm", "/dev/mqueue", *self.writable_dirs)

    @property
    def alive(self) -> bool:
        return self._channel is not None and self._dead is None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- requests ----------------------------------------------------------------------------
    def _call(
        self, request: dict[str, Any], timeout: float, max_reply: int | None = None
    ) -> dict[str, Any]:
        if self._brought_down is not None and self._channel is not None:
            self._relaunch()
        if self._dead is not None and self._channel is None:
            raise SandboxError(f"{self.backend} sandbox {self.id} is not running ({self._dead})")
        if self._channel is None:
            raise SandboxError(
                "the sandbox is not started: call start() or use it as a context manager"
            )
        limit = max_reply or (2 * max(self.limits.output_bytes, self.limits.transfer_bytes) + 4096)
        with self._lock:
            if self._dead is not None:
                raise SandboxError(f"{self.backend} sandbox {self.id} is broken ({self._dead})")
            request_id = next(self._ids)
            deadline = time.monotonic() + timeout
            phase = "sent"
            try:
                self._channel.send(encode({**request, "id": request_id}), deadline)
                while True:
                    reply = decode(self._channel.recv_frame(limit, deadline))
                    if reply.get("id") != request_id:
                        self._dead = "protocol error"
                        raise SandboxError(
                            f"{self.backend} sandbox {self.id} answered out of order"
                        )
                    if "phase" not in reply:
                        break
                    phase = str(reply["phase"])  # exec's progress: started, reaped
            except (EOFError, OSError, TimeoutError, ValueError, SandboxError) as exc:
                hung = isinstance(exc, TimeoutError)
                self._dead = self._dead or ("hung" if hung else "died")
                detail = self._describe_death() or f"{type(exc).__name__} {exc}"
                if phase == "started" and not self._closing and not self._outside_failure(hung):
                    # Only the running program can have done this (nothing of an earlier
                    # command survives it, and the supervisor is out of its reach otherwise).
                    self._brought_down = detail
                    raise _BroughtDownByProgram(detail, hung) from exc
                raise SandboxError(
                    f"{self.backend} sandbox {self.id} {self._dead} during {request['op']}: {detail}"
                ) from exc
        if "error_type" in reply:
            error = _SUPERVISOR_ERRORS.get(str(reply["error_type"]), SandboxError)
            raise error(f"{reply['error_type']} in sandbox: {reply.get('error')}")
        return reply

    def _relaunch(self) -> None:
        """A fresh sandbox in place of one a program brought down: its files are gone, as after
        a crash the program caused, and a backend that cannot start raises `SandboxError`."""
        channel, self._channel = self._channel, None
        if channel is not None:
            channel.close()
        self._destroy()
        self._brought_down = None
        self._dead = None
        self.start()

    def _outside_failure(self, hung: bool) -> bool:
        """Whether something outside the sandbox demonstrably stopped it mid-command (e.g. the
        Docker daemon is gone, or was told to kill the container): then it is the
        infrastructure's failure. Anything else is counted as the program's."""
        return False

    def exec(
        self,
        cmd: Command,
        stdin: bytes | str | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> ExecResult:
        """Run `cmd` (a shell string, or an argv list) in the work directory and wait for it."""
        argv = ["/bin/sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        if not argv:
            raise ValueError("exec needs a command: a shell string or a non-empty argv list")
        limit = self.limits.timeout_s if timeout is None else float(timeout)
        if limit <= 0:
            raise ValueError(f"timeout must be positive, got {timeout}")
        merged = {**self.base_env(), **self.env, **(env or {})}
        if any("\0" in arg for arg in argv) or any(
            "\0" in key or "=" in key or not key or "\0" in value for key, value in merged.items()
        ):
            raise ValueError(
                "exec arguments and environment may not contain NUL bytes (nor '=' in names)"
            )
        data = stdin.encode() if isinstance(stdin, str) else stdin
        started = time.monotonic()
        try:
            reply = self._call(
                {
                    "op": "exec",
                    "argv": pack_list(argv),
                    "env": pack_list(f"{key}={value}" for key, value in merged.items()),
                    "cwd": cwd,
                    "stdin": data,
                    "timeout": limit,
                    "max_output": self.limits.output_bytes,
                },
                limit + _GRACE_S,
                max_reply=2 * self.limits.output_bytes + 4096,
            )
        except _BroughtDownByProgram as fault:
            return ExecResult(
                exit_code=137,
                stdout=b"",
                stderr=(
                    f"the sandbox stopped while this command ran ({fault.detail}); that is the "
                    "command's failure\n"
                ).encode(),
                stdout_truncated=False,
                stderr_truncated=False,
                timed_out=fault.hung,
                wall_ms=(time.monotonic() - started) * 1000.0,
            )
        stderr = bytes(reply["stderr"])
        exit_code = int(reply["exit_code"])
        if reply.get("unsettled"):
            # Some of its processes outlived SIGKILL: the command fails, the sandbox is replaced.
            self._dead = self._brought_down = "processes of a command survived SIGKILL"
            exit_code = exit_code or 137
            stderr += b"\nprocesses of this command could not be killed; that is its failure\n"
        return ExecResult(
            exit_code=exit_code,
            stdout=bytes(reply["stdout"]),
            stderr=stderr,
            stdout_truncated=bool(reply["stdout_truncated"]),
            stderr_truncated=bool(reply["stderr_truncated"]),
            timed_out=bool(reply["timed_out"]),
            wall_ms=float(reply["wall_ms"]),
        )

    def base_env(self) -> dict[str, str]:
        """The environment every command starts from (the host's is never passed through).

        No per-user startup hooks: HOME cannot exist, and PYTHONNOUSERSITE keeps Python's user
        site (`usercustomize.py`, `.pth` files) off even for a caller that sets HOME."""
        return {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": HOME,
            "TMPDIR": self.tmpdir,
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONNOUSERSITE": "1",
            "PYTHONUNBUFFERED": "1",
        }

    def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        """Write a file (relative paths are inside the work directory); parents are created."""
        raw = data.encode() if isinstance(data, str) else bytes(data)
        self._check_transfer(len(raw), path)
        self._call({"op": "write", "path": path, "data": raw, "mode": mode}, 60.0)

    def read_file(self, path: str, max_bytes: int | None = None) -> bytes:
        """Read a file from the sandbox; FileNotFoundError if it is not there. At most
        `max_bytes` (and never more than the transfer limit) cross into this process: a
        larger file is an error, read no further than the limit."""
        limit = self.limits.transfer_bytes
        if max_bytes is not None:
            limit = min(limit, max_bytes)
        reply = self._call({"op": "read", "path": path, "max_bytes": limit}, 60.0)
        return bytes(reply["data"])

    def upload_dir(self, local_dir: str | os.PathLike[str], remote_dir: str = ".") -> None:
        """Copy a host directory (recursively, with file modes) into the sandbox."""
        source = Path(local_dir)
        if not source.is_dir():
            raise NotADirectoryError(f"upload_dir needs a directory on the host, got {source}")
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(source.rglob("*")):
                if path.is_file() and not path.is_symlink():
                    archive.write(path, path.relative_to(source).as_posix())
        data = buffer.getvalue()
        self._check_transfer(len(data), str(source))
        self._call({"op": "unzip", "path": remote_dir, "data": data}, 120.0)

    def reset(self) -> None:
        """Kill every process in the sandbox and remove everything its programs wrote (every
        place in `scratch_dirs`, IPC objects, keys). If anything stays it raises `SandboxError`
        and the sandbox is broken: a pool replaces it, never hands it out dirty. The writable
        directories get their image's content back, as a fresh sandbox has it."""
        try:
            self._call({"op": "reset"}, 30.0)
            self._seed()
        except SandboxError:
            self._dead = self._dead or "its reset failed"
            raise

    def _check_transfer(self, size: int, what: str) -> None:
        if size > self.limits.transfer_bytes:
            raise ValueError(
                f"{what} is {size} bytes; the sandbox transfer limit is {self.limits.transfer_bytes} "
                "(raise SandboxLimits.transfer_bytes)"
            )
