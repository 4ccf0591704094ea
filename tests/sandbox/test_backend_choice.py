"""`auto` never runs model-written code where it can see the host.

With the Docker image missing and bubblewrap not installed (hidden here in a mount namespace of
the test's own, so the real daemon and the real packages are what is probed), `auto` and `local`
refuse with the commands that fix it; only an explicit choice runs code unisolated.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support import require

pytestmark = pytest.mark.xdist_group("docker")  # starts Docker sandboxes (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
PRIME = str(ROOT / ".venv" / "bin" / "prime")
PYTHON = str(ROOT / ".venv" / "bin" / "python")
MISSING_IMAGE = "prime-sandbox/missing-for-this-test:0"


def run(*argv: str, bubblewrap: bool, **env: str) -> subprocess.CompletedProcess[str]:
    """`argv` on this host with the sandbox image missing and, unless `bubblewrap`, no bwrap."""
    require(os.geteuid() == 0 and shutil.which("unshare") is not None, "root and unshare")
    bwrap = shutil.which("bwrap")
    require(bwrap is not None, "bubblewrap (bwrap), to hide it")
    assert bwrap is not None
    hide = [
        *("unshare", "--mount", "--propagation", "private", "--"),
        *("sh", "-c", 'mount --bind /dev/null "$0" && exec "$@"', bwrap),
    ]
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PRIME_SANDBOX")}
    return subprocess.run(
        [*([] if bubblewrap else hide), *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**clean, "PRIME_SANDBOX_IMAGE": MISSING_IMAGE, **env},
    )


def test_auto_refuses_without_docker_image_and_bubblewrap(host_secret: Path) -> None:
    for backend in ("auto", "local"):
        done = run(
            PRIME,
            "sandbox",
            "run",
            "--backend",
            backend,
            "--",
            "cat",
            str(host_secret),
            bubblewrap=False,
        )
        assert done.returncode == 2, done
        assert "hunter2" not in done.stdout and "Traceback" not in done.stderr, done
        assert "apt-get install bubblewrap" in done.stderr, done.stderr
        if backend == "auto":
            assert "prime sandbox build-image" in done.stderr, done.stderr
            assert "unisolated" in done.stderr, done.stderr


def test_the_python_api_and_python_code_refuse_too() -> None:
    program = (
        "import asyncio\n"
        "from sandbox import SandboxPool, SandboxUnavailable, open_sandbox\n"
        "from python_code import Executor\n"
        "async def main():\n"
        "    for attempt in (lambda: asyncio.to_thread(open_sandbox().start),\n"
        "                    lambda: SandboxPool(1).start(),\n"
        "                    lambda: Executor().run('def f(): return 1', ['assert f() == 1'])):\n"
        "        try:\n"
        "            await attempt()\n"
        "            print('RAN')\n"
        "        except SandboxUnavailable as exc:\n"
        "            print('REFUSED', exc.error_type)\n"
        "asyncio.run(main())\n"
    )
    done = run(
        PYTHON,
        "-c",
        program,
        bubblewrap=False,
        PYTHONPATH=str(ROOT / "builtin_envs" / "python-code"),
    )
    assert done.stdout.split("\n")[:3] == ["REFUSED sandbox_unavailable"] * 3, done


def test_an_explicit_choice_runs_unisolated(host_secret: Path) -> None:
    by_name = run(
        PRIME,
        "sandbox",
        "run",
        "--backend",
        "unisolated",
        "--",
        "cat",
        str(host_secret),
        bubblewrap=False,
    )
    assert (by_name.returncode, by_name.stdout) == (0, "hunter2-secret"), by_name
    allowed = run(
        PRIME,
        "sandbox",
        "run",
        "--",
        "cat",
        str(host_secret),
        bubblewrap=False,
        PRIME_SANDBOX_ALLOW_UNISOLATED="1",
    )
    assert (allowed.returncode, allowed.stdout) == (0, "hunter2-secret"), allowed
    assert "unisolated" in allowed.stderr and "hides nothing" in allowed.stderr, allowed.stderr


def test_auto_without_the_image_uses_bubblewrap(host_secret: Path) -> None:
    done = run(PRIME, "sandbox", "run", "--", "cat", str(host_secret), bubblewrap=True)
    assert done.returncode == 1 and "hunter2" not in done.stdout, done
