"""A program cannot turn its own failure into a sandbox failure, and nothing outlives its command.

Both backends: the program tries to kill the supervisor (PID 1, its parent, `kill -9 -1`), to
leave something running (setsid, `set -m`, a double fork), to fill the disk and to spread its
memory over six processes. Each attempt must come back as the program's own result (never a
`SandboxError`), leave no process behind, keep the host's disk untouched and the whole tree
under one memory limit. The same attacks through python-code's scoring path score 0.0 in
tests/builtin_envs/test_python_code.py.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from typing import Any

import pytest

from sandbox import ExecResult, Sandbox, SandboxError, SandboxLimits, open_sandbox
from tests.support import read_proc

# no_leaks; Docker sandboxes: one worker for them all (tests/conftest.py)
pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.xdist_group("docker")]

LIMITS = SandboxLimits(memory_mb=256, pids=64, workdir_mb=32, shm_mb=16, output_bytes=64 << 10)

KILL_SUPERVISOR = {
    "pid 1": "kill -INT 1; kill -TERM 1; kill -STOP 1; kill -KILL 1; "
    "python3 -c 'import os, signal; os.kill(1, signal.SIGKILL)'",
    "parent pid": "kill -INT $PPID; kill -KILL $PPID; "
    "python3 -c 'import os; os.kill(int(open(\"/proc/%d/stat\" % os.getppid()).read().split()[3]), 9)'",
    "kill -9 -1": "sleep 30 & python3 -c 'import os; os.kill(-1, 9)'",
}
LEAVE_BEHIND = {
    "setsid": "setsid sh -c 'sleep 2; echo late > answer.txt' </dev/null >/dev/null 2>&1 & sleep 0.2",
    "set -m": "set -m; (sleep 2; echo late > answer.txt) & sleep 0.2",
    "double fork": 'python3 -c "import os, time\nif os.fork() == 0:\n    if os.fork() == 0:\n'
    "        time.sleep(2); open('answer.txt', 'w').write('late')\n    os._exit(0)\n\"",
    "daemon": "nohup sh -c 'while :; do echo late > answer.txt; sleep 0.1; done' "
    "</dev/null >/dev/null 2>&1 & disown 2>/dev/null; sleep 0.2",
}


def _others(box: Sandbox) -> list[str]:
    """Processes alive in the sandbox besides the supervisor and the command that lists them."""
    listing = box.exec(
        'for p in /proc/[0-9]*; do [ "${p#/proc/}" = 1 ] || [ "${p#/proc/}" = $$ ] || '
        'cat "$p/comm" 2>/dev/null; done'
    )
    return listing.stdout.decode().split()


def _host_processes(box: Sandbox) -> list[int]:
    """Host-side: live processes of the local sandbox's program uid (none may outlive a command)."""
    from sandbox.backends.local import processes_of

    uid = getattr(box, "uid", None)
    return processes_of(uid) if uid is not None else []


def _assert_nothing_survives(box: Sandbox) -> None:
    assert _host_processes(box) == []
    assert _others(box) == []


@pytest.mark.parametrize("attack", sorted(KILL_SUPERVISOR))
def test_programs_cannot_kill_the_supervisor(backend: str, attack: str) -> None:
    with open_sandbox(backend, limits=LIMITS) as box:
        box.write_file("kept.txt", "still here")
        result = box.exec(KILL_SUPERVISOR[attack], timeout=10)
        assert isinstance(result, ExecResult) and not result.timed_out
        # The same sandbox answers, with its files: nothing was relaunched behind our back.
        assert box.alive and box.read_file("kept.txt") == b"still here"
        _assert_nothing_survives(box)


@pytest.mark.parametrize("attack", sorted(LEAVE_BEHIND))
def test_nothing_outlives_its_command(backend: str, attack: str) -> None:
    with open_sandbox(backend, limits=LIMITS) as box:
        result = box.exec(LEAVE_BEHIND[attack], timeout=10)
        assert result.exit_code == 0, result
        _assert_nothing_survives(box)
        # What a survivor would have done (overwrite a later command's answer) never happens.
        later = box.exec("echo mine > answer.txt; sleep 2.5; cat answer.txt")
        assert later.stdout == b"mine\n"
        _assert_nothing_survives(box)


def _host_bytes(box: Any) -> int:
    """Bytes the sandbox holds on the host's disk: its directory (local) or the container's
    writable layer (Docker's overlay2 upper directory)."""
    root = box.root if box.backend == "local" else None
    if root is None:
        box.container.reload()
        root = box.container.attrs["GraphDriver"]["Data"]["UpperDir"]
    total = 0
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            except OSError:
                pass
    return total


def test_disk_fill_stops_at_the_quota_and_never_reaches_the_host_disk(backend: str) -> None:
    quota = LIMITS.workdir_mb << 20
    places = ("fill", "$TMPDIR/fill", "/dev/shm/fill")
    fill = "; ".join(f"head -c {2 * quota} /dev/zero > {place}" for place in places)
    with open_sandbox(backend, limits=LIMITS) as box:
        result = box.exec(fill, timeout=20)
        assert result.exit_code != 0 and result.stderr.count(b"No space left") == 3, result
        sizes = box.exec(f"stat -c %s {' '.join(places)}").stdout.split()
        assert len(sizes) == 3 and all(int(size) <= quota for size in sizes), sizes
        assert _host_bytes(box) < 1 << 20
        assert box.exec("echo ok").stdout == b"ok\n"
        _assert_nothing_survives(box)


SPREAD = """
import os, sys, time
children = []
for _ in range(6):
    pid = os.fork()
    if pid == 0:
        block = bytearray(64 << 20)
        block[:: 4096] = b"x" * len(block[:: 4096])   # touch every page
        time.sleep(1.5)                               # all six hold theirs at once
        os.write(1, b"held\\n")
        os._exit(0)
    children.append(pid)
for pid in children:
    os.waitpid(pid, 0)
"""


def test_memory_limit_holds_for_the_whole_process_tree(backend: str) -> None:
    """6 x 64 MB: each process is far under the 256 MB limit, together they are not."""
    with open_sandbox(backend, limits=LIMITS) as box:
        if backend == "local" and getattr(box, "cgroup", None) is None:
            pytest.fail("no cgroup for the local sandbox: run as root with cgroup v1 or v2")
        result = box.exec(["python3", "-c", SPREAD], timeout=30)
        held = result.stdout.count(b"held")
        assert held < 6, result
        assert box.exec("echo alive").stdout == b"alive\n"
        _assert_nothing_survives(box)


def _supervisor_host_pid(box: Any) -> int:
    if box.backend == "docker":
        box.container.reload()
        return int(box.container.attrs["State"]["Pid"])
    # The launcher (bwrap or unshare) is the host process we started; the supervisor its child.
    for pid, stat in read_proc("stat"):
        if int(stat.rsplit(b")", 1)[1].split()[1]) == box._proc.pid:
            return pid
    raise AssertionError("no supervisor process found")


def test_a_supervisor_that_dies_anyway_mid_command_is_the_commands_failure(backend: str) -> None:
    """Defence in depth: however it happens (here the host kills it, with no daemon on record),
    a supervisor that dies while a program runs fails that command; it is never a SandboxError."""
    with open_sandbox(backend, limits=LIMITS) as box:
        first_id = box.id
        box.write_file("kept.txt", "x")
        killer = subprocess.Popen(
            ["sh", "-c", f"sleep 1; kill -9 {_supervisor_host_pid(box)}"],
        )
        try:
            result = box.exec("sleep 20", timeout=30)
        finally:
            killer.wait()
        assert result.exit_code == 137 and not result.timed_out
        assert b"the command's failure" in result.stderr
        # The next call gets a fresh sandbox, as after any crash the program caused.
        assert box.exec("echo fresh").stdout == b"fresh\n"
        assert box.id != first_id
        with pytest.raises(FileNotFoundError):
            box.read_file("kept.txt")


def test_a_sandbox_stopped_by_the_host_mid_command_is_a_sandbox_error(backend: str) -> None:

    box = open_sandbox(backend, limits=LIMITS).start()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            box.exec("sleep 20", timeout=30)
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(1.0)
    box.stop()
    thread.join(30)
    assert len(errors) == 1 and isinstance(errors[0], SandboxError), errors
