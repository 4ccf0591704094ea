"""The supervisor: the process inside every sandbox that runs commands on request.

WHY a supervisor process: starting a process through `docker exec` costs a daemon round trip and a new
exec session (tens of ms); a long-lived process that reads framed requests from its stdin and
answers on its stdout answers in about a millisecond, and the same supervisor runs the local backend,
so both backends share one tested code path (kill, reap, truncate, timeout, reset).

This file must stay self-contained, stdlib only (no json, shutil or tarfile at import time):
the Docker backend runs its source with `python3 -c` on the image's interpreter.
The host imports `encode`/`decode` from here, so both ends share one codec. The codec never
evaluates anything: the sandbox is hostile, and a process inside could forge frames on the
supervisor's stdout, so the host parses strictly and bounds every size.
"""

import os
import select
import selectors
import signal
import struct
import subprocess
import sys
import time

# -- codec ---------------------------------------------------------------------------------
# A frame is a 4-byte big-endian length and a payload; a payload is a sequence of fields:
# key length (1 byte), key (ascii), type (1 byte), value length (4 bytes), value.
_HEADER = struct.Struct(">I")
_FIELD = struct.Struct(">B")
_LEN = struct.Struct(">I")


def encode(message):
    """Serialise a flat dict of str -> bytes | str | int | float | bool | None into a frame."""
    parts = []
    for key, value in message.items():
        raw_key = key.encode("ascii")
        if value is None:
            kind, raw = b"n", b""
        elif isinstance(value, bool):
            kind, raw = b"t", b"1" if value else b"0"
        elif isinstance(value, int):
            kind, raw = b"i", str(value).encode("ascii")
        elif isinstance(value, float):
            kind, raw = b"f", repr(value).encode("ascii")
        elif isinstance(value, str):
            kind, raw = b"s", value.encode("utf-8", "surrogateescape")
        elif isinstance(value, (bytes, bytearray, memoryview)):
            kind, raw = b"b", bytes(value)
        else:
            raise TypeError(f"cannot encode {type(value).__name__} for field {key!r}")
        parts.append(_FIELD.pack(len(raw_key)) + raw_key + kind + _LEN.pack(len(raw)) + raw)
    payload = b"".join(parts)
    return _HEADER.pack(len(payload)) + payload


def decode(payload):
    """Parse a frame payload back into a dict; raises ValueError on anything malformed."""
    message = {}
    pos, end = 0, len(payload)
    while pos < end:
        if pos + 1 > end:
            raise ValueError("truncated field")
        key_len = payload[pos]
        pos += 1
        key = bytes(payload[pos : pos + key_len]).decode("ascii")
        pos += key_len
        if pos + 5 > end:
            raise ValueError("truncated field header")
        kind = payload[pos : pos + 1]
        (length,) = _LEN.unpack_from(payload, pos + 1)
        pos += 5
        if pos + length > end:
            raise ValueError(f"field {key!r} overruns the frame")
        raw = bytes(payload[pos : pos + length])
        pos += length
        if kind == b"n":
            value = None
        elif kind == b"t":
            value = raw == b"1"
        elif kind == b"i":
            value = int(raw.decode("ascii"))
        elif kind == b"f":
            value = float(raw.decode("ascii"))
        elif kind == b"s":
            value = raw.decode("utf-8", "surrogateescape")
        elif kind == b"b":
            value = raw
        else:
            raise ValueError(f"unknown field type {kind!r}")
        message[key] = value
    return message


def pack_list(items):
    """NUL-join strings (argv, env entries) into one bytes field."""
    return b"\0".join(item.encode("utf-8", "surrogateescape") for item in items)


def unpack_list(raw):
    if not raw:
        return []
    return [item.decode("utf-8", "surrogateescape") for item in raw.split(b"\0")]


# -- supervisor ------------------------------------------------------------------------------
_CHUNK = 65536
# A command's processes must all be gone within this long after it ends; more means something
# in the sandbox is unkillable, which is the sandbox's failure, not the program's.
_SETTLE_S = 10.0


def _read_exact(stream, size, deadline):
    """`size` bytes from the host, or None at EOF or once the sandbox's lifetime is over."""
    data = b""
    while len(data) < size:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([stream], [], [], remaining)[0]:
            return None
        chunk = stream.read(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


class Supervisor:
    """Serves requests from `reader` until EOF (the host went away) or the TTL, then exits.

    It is PID 1 of the sandbox's own PID namespace (the host checks), with every signal left
    at its default disposition, so the kernel drops any signal a process inside sends it. As
    root it runs programs under `runner` (uid, gid): they cannot ptrace, prlimit or signal it,
    and it keeps only CAP_SETUID, CAP_SETGID and CAP_KILL for itself.
    """

    def __init__(
        self, workdir, scratch, reader, writer, child_limits, runner, cgroup_fds, deadline
    ):
        self.workdir = workdir
        # Every place programs can write (the host's list, checked by tests/sandbox/test_reset),
        # with the mode each had at the start, which a reset restores.
        self.scratch = [
            (path, os.stat(path).st_mode & 0o7777) for path in scratch if os.path.isdir(path)
        ]
        self.reader = reader
        self.writer = writer
        self.child_limits = child_limits  # list of (setrlimit, resource constant, value)
        self.runner = runner  # (uid, gid) for programs, or None: the supervisor's own uid
        self.cgroup_fds = cgroup_fds  # open cgroup.procs files every program joins
        self.deadline = deadline
        self.sealed = _seal()
        _fresh_keyrings(self.runner)

    def serve(self):
        while True:
            header = _read_exact(self.reader, _HEADER.size, self.deadline)
            if header is None:
                return
            (length,) = _HEADER.unpack(header)
            payload = _read_exact(self.reader, length, self.deadline)
            if payload is None:
                return
            request = decode(payload)
            try:
                response = self.handle(request)
            except Exception as exc:  # noqa: BLE001 (reported to the host, which raises it)
                response = {"error_type": type(exc).__name__, "error": str(exc)}
            self._send(request, response)

    def _send(self, request, response):
        response["id"] = request.get("id")
        self.writer.write(encode(response))
        self.writer.flush()

    def handle(self, request):
        op = request.get("op")
        if op == "ping":
            return {
                "pid": os.getpid(),
                "uid": os.getuid(),
                "runner_uid": self.runner[0] if self.runner else os.getuid(),
                "workdir": self.workdir,
                "sealed": self.sealed,
            }
        if op == "exec":
            return self.exec(request)
        if op == "write":
            return self._as_runner(self.write, request)
        if op == "read":
            return self._as_runner(self.read, request)
        if op == "unzip":
            return self._as_runner(self.unzip, request)
        if op == "reset":
            return self.reset()
        raise ValueError(f"unknown op {op!r}")

    def _as_runner(self, func, *args):
        """File operations run with the programs' uid: a symlink a program planted in /work
        reaches nothing the program could not read or write itself."""
        if self.runner is None:
            return func(*args)
        uid, gid = self.runner
        os.setegid(gid)
        os.seteuid(uid)
        try:
            return func(*args)
        finally:
            os.seteuid(0)
            os.setegid(0)

    def _path(self, path):
        return path if os.path.isabs(path) else os.path.join(self.workdir, path)

    def write(self, request):
        path = self._path(request["path"])
        parent = os.path.dirname(path)
        if parent:
            os.makedirs(parent, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, request.get("mode") or 0o644)
        with os.fdopen(fd, "wb") as handle:
            handle.write(request["data"])
        return {"size": len(request["data"])}

    def read(self, request):
        limit = request["max_bytes"]
        with open(self._path(request["path"]), "rb") as handle:
            data = handle.read(limit + 1)
        if len(data) > limit:
            raise ValueError(f"{request['path']} is larger than {limit} bytes")
        return {"data": data}

    def unzip(self, request):
        # Imported here: zipfile needs shutil, which a python3-minimal image does not have.
        import io
        import zipfile

        target = self._path(request["path"])
        os.makedirs(target, exist_ok=True)
        with zipfile.ZipFile(io.BytesIO(request["data"])) as archive:
            # ZipFile.extractall strips absolute paths and '..' components.
            archive.extractall(target)
            for info in archive.infolist():
                mode = (info.external_attr >> 16) & 0o777
                if mode and not info.is_dir():
                    os.chmod(os.path.join(target, info.filename), mode)
        return {}

    def _prepare_child(self):
        # Runs in the child between fork and exec: join the sandbox's cgroups (memory and pids
        # for the whole tree), per-process limits, first in line for the OOM killer, and last
        # the programs' uid (which also drops every capability).
        for fd in self.cgroup_fds:
            os.write(fd, b"0")
        for setrlimit, name, value in self.child_limits:
            setrlimit(name, (value, value))
        try:
            with open("/proc/self/oom_score_adj", "w") as handle:
                handle.write("1000")
        except OSError:
            pass
        if self.runner is not None:
            uid, gid = self.runner
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)

    def exec(self, request):
        argv = unpack_list(request["argv"])
        env = dict(item.split("=", 1) for item in unpack_list(request.get("env") or b""))
        cwd = self._path(request.get("cwd") or ".")
        if not os.path.isdir(cwd):
            raise NotADirectoryError(f"the working directory {cwd} does not exist in the sandbox")
        cap = request["max_output"]
        timeout = request["timeout"]
        stdin_data = request.get("stdin")
        started = time.monotonic()
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=env,
                start_new_session=True,
                preexec_fn=self._prepare_child,  # noqa: PLW1509 (the supervisor has one thread)
            )
        except (OSError, subprocess.SubprocessError) as exc:
            # The program could not start (not found, not executable, no process left under
            # the sandbox's limit): the shell's convention.
            code = 127 if isinstance(exc, FileNotFoundError) else 126
            return {
                "exit_code": code,
                "stdout": b"",
                "stderr": (str(exc) + "\n").encode(),
                "stdout_truncated": False,
                "stderr_truncated": False,
                "timed_out": False,
                "wall_ms": (time.monotonic() - started) * 1000.0,
            }
        # From here on the program runs: if the sandbox dies before the answer, the host
        # counts it as the program's doing.
        self._send(request, {"phase": "started"})
        outputs = {proc.stdout: bytearray(), proc.stderr: bytearray()}
        truncated = {proc.stdout: False, proc.stderr: False}
        selector = selectors.DefaultSelector()
        selector.register(proc.stdout, selectors.EVENT_READ)
        selector.register(proc.stderr, selectors.EVENT_READ)
        pending = memoryview(stdin_data or b"")
        if stdin_data is not None:
            os.set_blocking(proc.stdin.fileno(), False)
            if pending:
                selector.register(proc.stdin, selectors.EVENT_WRITE)
            else:
                proc.stdin.close()
        deadline = started + timeout
        timed_out = False
        open_streams = 2
        swept = False
        while open_streams:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            if not swept and proc.poll() is not None:
                # The command is done; whatever it started goes with it, so a background child
                # holding the pipes open cannot stall the answer.
                _kill_others()
                swept = True
            for key, _ in selector.select(min(remaining, 0.5)):
                stream = key.fileobj
                if stream is proc.stdin:
                    try:
                        written = os.write(stream.fileno(), pending[:_CHUNK])
                    except (BrokenPipeError, BlockingIOError) as exc:
                        written = len(pending) if isinstance(exc, BrokenPipeError) else 0
                    pending = pending[written:]
                    if not pending:
                        selector.unregister(stream)
                        stream.close()
                    continue
                chunk = os.read(stream.fileno(), _CHUNK)
                if not chunk:
                    selector.unregister(stream)
                    open_streams -= 1
                    continue
                buffer = outputs[stream]
                room = cap - len(buffer)
                if room > 0:
                    buffer += chunk[:room]
                if len(chunk) > max(room, 0):
                    truncated[stream] = True
        if not timed_out:
            # Its outputs are closed, but the command may still run (coreutils close stdout
            # and stderr before they exit): it gets the rest of its time, not a SIGKILL.
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
        _kill_others()
        selector.close()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None and not stream.closed:
                stream.close()
        code = proc.wait()  # before _settle's waitpid(-1) could take its status away
        try:
            _settle()
        except RuntimeError:
            unsettled = True  # the host fails the command and replaces the sandbox
        else:
            unsettled = False
            self._send(request, {"phase": "reaped"})
        return {
            "unsettled": unsettled,
            "exit_code": 128 - code if code < 0 else code,
            "stdout": bytes(outputs[proc.stdout]),
            "stderr": bytes(outputs[proc.stderr]),
            "stdout_truncated": truncated[proc.stdout],
            "stderr_truncated": truncated[proc.stderr],
            "timed_out": timed_out,
            "wall_ms": (time.monotonic() - started) * 1000.0,
        }

    def reset(self):
        """Kill every other process of this sandbox and remove everything programs wrote: the
        contents of every writable place, System V and POSIX IPC objects, keys. What cannot be
        removed fails the reset (RuntimeError), and the host replaces the sandbox."""
        _settle()
        left = []
        for root, mode in self.scratch:
            left += self._as_runner(_empty_dir, root, mode)
        left += self._as_runner(_remove_sysv_ipc)
        _fresh_keyrings(self.runner)
        if left:
            raise RuntimeError(f"the reset could not remove {', '.join(sorted(left)[:5])}")
        return {}


def _kill_others():
    # As PID 1 of the sandbox's namespace, kill(-1) reaches every process in the sandbox but
    # this one: setsid, double forks and daemons included (CAP_KILL when they run as another uid).
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _settle():
    """Kill and reap until the supervisor is the only process left in the sandbox.

    One SIGKILL is not the end of a fork bomb: its members are still exiting (and, as zombies,
    still listed) when kill returns. Orphans are re-parented to PID 1, so reaping here is what
    empties the process table."""
    deadline = time.monotonic() + _SETTLE_S
    me = str(os.getpid())
    while True:
        _kill_others()
        _reap()
        if not [name for name in os.listdir("/proc") if name.isdigit() and name != me]:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes in the sandbox survived SIGKILL for {_SETTLE_S:g}s")
        time.sleep(0.001)


def _reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _seal():
    """Make the supervisor non-dumpable, so no program can open /proc/<supervisor>/fd/0 or
    /fd/1, steal requests or forge replies (a fake passing test run), even under its uid."""
    try:
        import ctypes
    except ImportError:  # Debian's python3-minimal has no ctypes: the host refuses to use it
        return False
    return ctypes.CDLL(None).prctl(4, 0, 0, 0, 0) == 0  # PR_SET_DUMPABLE, 0


def _empty_dir(root, mode):
    """Remove everything below `root` and give it back `mode`; returns what is left. A program
    may have taken the permissions off a directory, which its owner (our uid here) may undo."""
    _ignore(os.chmod, root, mode)
    stack, made = [root], []
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                _ignore(os.chmod, entry.path, 0o700)
                stack.append(entry.path)
                made.append(entry.path)
            else:
                _ignore(os.unlink, entry.path)
    for path in reversed(made):  # children before their parents
        _ignore(os.rmdir, path)
    try:
        return [os.path.join(root, name) for name in os.listdir(root)]
    except OSError as exc:
        return [f"{root} ({exc.strerror})"]


def _ignore(func, *args):
    try:
        func(*args)
    except OSError:
        pass


_IPC_RMID = 0


def _sysv_ids(kind):
    try:
        with open(f"/proc/sysvipc/{kind}") as handle:
            return [int(line.split()[1]) for line in list(handle)[1:] if line.strip()]
    except OSError:
        return []


def _remove_sysv_ipc():
    """Remove the sandbox's System V shared memory, message queues and semaphores (its IPC
    namespace holds nothing else); returns what is left. POSIX message queues are files in
    /dev/mqueue, one of the scratch places."""
    kinds = ("shm", "msg", "sem")
    if not any(_sysv_ids(kind) for kind in kinds):
        return []
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    remove = {
        "shm": lambda ident: libc.shmctl(ident, _IPC_RMID, None),
        "msg": lambda ident: libc.msgctl(ident, _IPC_RMID, None),
        "sem": lambda ident: libc.semctl(ident, 0, _IPC_RMID),
    }
    for kind in kinds:
        for ident in _sysv_ids(kind):
            remove[kind](ident)
    return [f"System V {kind} {ident}" for kind in kinds for ident in _sysv_ids(kind)]


# keyctl(2) by machine (glibc has no wrapper); the asm-generic number elsewhere.
_KEYCTL = {"x86_64": 250, "i686": 288, "armv7l": 311, "ppc64le": 271, "s390x": 280}
_KEYCTL_JOIN_SESSION_KEYRING = 1
_KEYCTL_CLEAR = 7
_USER_KEYRINGS = (-4, -5)  # KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING


def _fresh_keyrings(runner):
    """Keys are storage that outlives every process. Join a new, empty session keyring, which
    the programs inherit (never the host's), and clear the programs' uid's own keyrings (as
    root, a uid of the sandbox's own; without root, the user namespace's, per namespace since
    Linux 5.3, and left alone before). Docker's seccomp profile refuses keyctl: nothing to do."""
    try:
        import ctypes
    except ImportError:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    number = _KEYCTL.get(os.uname().machine, 219)
    libc.syscall(number, _KEYCTL_JOIN_SESSION_KEYRING, None)
    release = tuple(int(part) for part in os.uname().release.split("-")[0].split(".")[:2])
    if runner is None and release < (5, 3):
        return
    pid = os.fork()
    if pid == 0:  # the programs' uid, fully: the user keyrings follow the real uid
        try:
            if runner is not None:
                os.setgroups([])
                os.setgid(runner[1])
                os.setuid(runner[0])
            for keyring in _USER_KEYRINGS:
                libc.syscall(number, _KEYCTL_CLEAR, keyring)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def _parse_limits(text):
    if not text:
        return []
    import resource  # imported before any fork: the child must not import

    limits = []
    for item in filter(None, text.split(",")):
        name, value = item.split("=")
        limits.append((resource.setrlimit, getattr(resource, "RLIMIT_" + name.upper()), int(value)))
    return limits


def command(python, workdir, scratch_dirs, ttl_s, rlimits, runner="", cgroup_fds=()):
    """The command line that starts a supervisor (the host's side; `main` reads it back): this
    file's source run by `python -I -S -c`, then the work directory, the scratch directories,
    the time to live, the children's rlimits, the `uid:gid` programs run as and cgroup fds."""
    with open(__file__) as handle:
        source = handle.read()
    return [python, "-I", "-S", "-c", source, workdir, ":".join(scratch_dirs), str(int(ttl_s)),
            rlimits, runner, ",".join(str(fd) for fd in cgroup_fds)]  # fmt: skip


def main(argv):
    workdir, scratch, ttl, limits, runner, cgroup_fds = argv
    # Default dispositions only: as PID 1 of its namespace the kernel then drops every signal a
    # process in the sandbox sends it (a Python handler, e.g. SIGINT's, would let it through).
    for number in range(1, signal.NSIG):
        if number not in (signal.SIGKILL, signal.SIGSTOP):
            try:
                signal.signal(number, signal.SIG_DFL)
            except (OSError, ValueError):
                pass
    run_as = None
    if runner:
        uid, gid = (int(part) for part in runner.split(":"))
        run_as = (uid, gid)
        os.setgroups([])  # the supervisor's own groups must not leak into file operations
    os.makedirs(workdir, exist_ok=True)
    os.chdir(workdir)
    reader = os.fdopen(os.dup(0), "rb", buffering=0)
    writer = os.fdopen(os.dup(1), "wb")
    # Nothing the supervisor or its children print may land on the protocol stream.
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    # The backstop: even if the host and the reaper both fail, the sandbox ends itself.
    deadline = time.monotonic() + (float(ttl) if float(ttl) > 0 else 10 * 365 * 86400.0)
    fds = [int(fd) for fd in cgroup_fds.split(",") if fd]
    places = scratch.split(":")
    Supervisor(
        workdir, places, reader, writer, _parse_limits(limits), run_as, fds, deadline
    ).serve()


if __name__ == "__main__":
    main(sys.argv[1:])
