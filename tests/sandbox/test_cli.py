"""`prime sandbox ...` driven as a user would: the installed console script, real backends."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.xdist_group("docker")  # starts Docker sandboxes (tests/conftest.py)

PRIME = str(Path(__file__).resolve().parents[2] / ".venv" / "bin" / "prime")


def prime(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PRIME, "sandbox", *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=120,
        check=False,
    )


@pytest.mark.usefixtures("no_leaks")
def test_run_passes_output_and_exit_status_through(backend: str) -> None:
    done = prime(
        "run",
        "--backend",
        backend,
        "--",
        "python3",
        "-c",
        "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)",
    )
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")


@pytest.mark.usefixtures("no_leaks")
def test_run_reports_timeout_and_truncation(backend: str) -> None:
    slow = prime("run", "--backend", backend, "--timeout", "1", "--", "sleep", "30")
    assert slow.returncode == 124 and "timed out after 1s" in slow.stderr
    loud = prime("run", "--backend", backend, "--", "head", "-c", "3000000", "/dev/zero")
    assert loud.returncode == 0 and "stdout truncated" in loud.stderr


@pytest.mark.usefixtures("no_leaks")
def test_run_with_stdin(backend: str) -> None:
    done = prime("run", "--backend", backend, "--stdin", "--", "tr", "a-z", "A-Z", stdin="hello")
    assert done.stdout == "HELLO"


def test_bad_input_is_a_clear_error_without_traceback(docker_ready: None) -> None:
    for args, message in [
        (("run", "--image", "prime-sandbox/nope:0", "--", "true"), "prime sandbox build-image"),
        (
            ("run", "--backend", "local", "--image", "x", "--", "true"),
            "local backend cannot use an image",
        ),
        (("run", "--timeout", "0", "--", "true"), "must be positive"),
        (("run", "--backend", "podman", "--", "true"), "Invalid value for '--backend'"),
    ]:
        done = prime(*args)
        assert done.returncode == 2, (args, done)
        assert message in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_ls_gc_and_build_image_when_present(docker_ready: None) -> None:
    assert prime("ls").returncode == 0
    gc = prime("gc")
    assert gc.returncode == 0 and gc.stdout.startswith("removed ")
    built = prime("build-image")
    assert built.returncode == 0 and built.stdout.strip().endswith(": present")
