"""Hostile programs, in both backends: each is contained, reported, and leaves nothing behind."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from sandbox import Sandbox, SandboxLimits, open_sandbox

# no_leaks; Docker sandboxes: one worker for them all (tests/conftest.py)
pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.xdist_group("docker")]


def process_names(box: Sandbox) -> list[str]:
    """Names of the processes alive in the sandbox, minus the one shell that lists them."""
    listing = box.exec("cat /proc/[0-9]*/comm 2>/dev/null")
    names = listing.stdout.decode().split()
    names.remove("sh")
    return names


def test_well_behaved_program(backend: str, limits: SandboxLimits) -> None:
    with open_sandbox(backend, limits=limits) as box:
        result = box.exec(
            ["python3", "-c", "import sys, json; print(json.dumps(sys.stdin.read()[::-1]))"],
            stdin="abc",
        )
        assert result.ok and result.stdout == b'"cba"\n' and not result.timed_out
        failing = box.exec("echo oops >&2; exit 3")
        assert (failing.exit_code, failing.stderr, failing.ok) == (3, b"oops\n", False)


def test_a_command_that_closes_its_outputs_before_exiting_keeps_its_status(
    backend: str, limits: SandboxLimits
) -> None:
    """coreutils close stdout and stderr just before they exit: the command is not over then,
    and killing it there made `cat`'s status 137 on a loaded machine."""
    with open_sandbox(backend, limits=limits) as box:
        done = box.exec("echo out; exec >&- 2>&-; sleep 0.5; exit 3")
        assert (done.exit_code, done.stdout, done.timed_out) == (3, b"out\n", False), done
        still = box.exec("exec >&- 2>&-; sleep 30", timeout=1)
        assert still.timed_out and still.exit_code == 137, still


def test_fork_bomb_is_contained(backend: str, limits: SandboxLimits) -> None:
    with open_sandbox(backend, limits=limits) as box:
        bomb = box.exec("bomb() { bomb | bomb & }; bomb; sleep 5", timeout=3)
        assert bomb.timed_out or bomb.exit_code != 0
        # The sandbox (and the host) still work, and no bomb process survived the command.
        assert box.exec("echo ok").stdout == b"ok\n"
        assert "sh" not in process_names(box)


def test_memory_hog_is_killed_and_sandbox_survives(backend: str, limits: SandboxLimits) -> None:
    hog = "x = []\nwhile True:\n    x.append(b'x' * (32 << 20))\n"
    with open_sandbox(backend, limits=limits) as box:
        result = box.exec(["python3", "-c", hog], timeout=30)
        assert not result.timed_out
        # Killed by the cgroup (137) in Docker, MemoryError under RLIMIT_AS locally.
        assert result.exit_code == 137 or b"MemoryError" in result.stderr, result
        assert box.exec("echo alive").stdout == b"alive\n"


def test_infinite_loop_times_out(backend: str, limits: SandboxLimits) -> None:
    with open_sandbox(backend, limits=limits) as box:
        result = box.exec(["python3", "-c", "while True: pass"], timeout=1.5)
        assert result.timed_out and result.exit_code == 137
        assert 1400 <= result.wall_ms < 8000


def test_sleeping_past_the_timeout_kills_its_children_too(
    backend: str, limits: SandboxLimits
) -> None:
    with open_sandbox(backend, limits=limits) as box:
        result = box.exec("sleep 60 & sleep 60", timeout=1)
        assert result.timed_out
        assert "sleep" not in process_names(box)


def test_huge_output_is_truncated_and_flagged(backend: str, limits: SandboxLimits) -> None:
    with open_sandbox(backend, limits=limits) as box:
        program = "import sys\nfor _ in range(200): sys.stdout.write('y' * 100000)\nsys.stderr.write('e' * 10)"
        result = box.exec(["python3", "-c", program])
        assert result.exit_code == 0
        assert len(result.stdout) == limits.output_bytes and result.stdout_truncated
        assert result.stderr == b"e" * 10 and not result.stderr_truncated


def test_writes_outside_the_workdir_fail(
    backend: str, limits: SandboxLimits, tmp_path: Path
) -> None:
    tmp_path.chmod(0o777)
    target = tmp_path / "escaped"
    with open_sandbox(backend, limits=limits) as box:
        for path in ("/usr/evil", "/etc/evil", "/evil", str(target)):
            result = box.exec(["sh", "-c", f"echo x > {path}"])
            assert result.exit_code != 0, f"wrote {path}"
        assert box.exec("echo fine > inside && cat inside").stdout == b"fine\n"
    assert not target.exists() and not Path("/usr/evil").exists() and not Path("/evil").exists()


def test_host_secrets_are_unreadable(
    backend: str, limits: SandboxLimits, host_secret: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PRIME_TEST_SECRET", "hunter2")
    with open_sandbox(backend, limits=limits) as box:
        read = box.exec(["cat", str(host_secret)])
        assert read.exit_code != 0 and b"hunter2" not in read.stdout
        env = box.exec("env; ls -a /root /home 2>&1; cat /root/.bash_history 2>&1")
        assert b"hunter2" not in env.stdout and b"PRIME_TEST_SECRET" not in env.stdout


def test_network_connection_fails(backend: str, limits: SandboxLimits) -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    accepted: list[object] = []

    def accept() -> None:
        try:
            accepted.append(listener.accept())
        except OSError:
            pass

    probe = (
        f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=3)\n"
        "s.sendall(b'leak')\nprint('connected')"
    )
    try:
        with open_sandbox(backend, limits=limits) as box:
            result = box.exec(["python3", "-c", probe], timeout=10)
            thread = threading.Thread(target=accept)
            thread.start()
            thread.join()
            assert result.exit_code != 0 and b"connected" not in result.stdout, result
            outside = box.exec(
                ["python3", "-c", "import socket; socket.create_connection(('1.1.1.1', 53), 2)"]
            )
            assert outside.exit_code != 0
    finally:
        listener.close()
    assert accepted == []


def test_files_round_trip(backend: str, limits: SandboxLimits, tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "main.py").write_text("print(open('data.txt').read())")
    (tmp_path / "pkg" / "run.sh").write_text("#!/bin/sh\necho ran\n")
    (tmp_path / "pkg" / "run.sh").chmod(0o755)
    with open_sandbox(backend, limits=limits) as box:
        box.upload_dir(tmp_path / "pkg", "proj")
        box.write_file("proj/data.txt", "payload")
        assert box.exec(["python3", "main.py"], cwd="proj").stdout == b"payload\n"
        assert box.exec("./proj/run.sh").stdout == b"ran\n"
        assert box.read_file("proj/data.txt") == b"payload"
        with pytest.raises(FileNotFoundError):
            box.read_file("missing.txt")
        with pytest.raises(OSError):  # read-only root: EROFS in Docker, EACCES/EROFS locally
            box.write_file("/usr/x", "no")
        box.reset()
        assert box.exec("ls -A").stdout == b""


def test_env_and_missing_program(backend: str, limits: SandboxLimits) -> None:
    with open_sandbox(backend, limits=limits, env={"A": "1"}) as box:
        assert box.exec("echo $A$B", env={"B": "2"}).stdout == b"12\n"
        missing = box.exec(["no-such-program"])
        assert missing.exit_code == 127 and b"no-such-program" in missing.stderr
        with pytest.raises(NotADirectoryError, match="does not exist"):
            box.exec("true", cwd="nowhere")
        with pytest.raises(ValueError, match="NUL"):
            box.exec(["echo", "a\0b"])
        with pytest.raises(ValueError, match="NUL"):
            box.exec("true", env={"A=B": "1"})
        assert box.exec("echo still fine").stdout == b"still fine\n"


FORGE = r"""
import os
opened = []
for pid in (int(p) for p in os.listdir('/proc') if p.isdigit() and int(p) != os.getpid()):
    for fd, flags in ((0, os.O_RDONLY | os.O_NONBLOCK), (1, os.O_WRONLY)):
        try:
            os.close(os.open(f'/proc/{pid}/fd/{fd}', flags))
            opened.append((pid, fd))
        except OSError:
            pass
print(opened)
"""


def test_programs_cannot_reach_the_supervisor_channel(backend: str, limits: SandboxLimits) -> None:
    """A program that could write to the supervisor's stdout could forge a passing result."""
    with open_sandbox(backend, limits=limits) as box:
        result = box.exec(["python3", "-c", FORGE])
        assert result.stdout == b"[]\n", result
