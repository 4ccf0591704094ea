"""A reset between pooled rollouts empties every place a program can write.

What one rollout leaves anywhere (files in every writable directory, including one it made
unreadable; System V and POSIX IPC objects; keyrings) must be gone for the next rollout that
gets the same sandbox, in both backends; and every writable place is one the reset knows.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from sandbox import SandboxLimits, SandboxPool, open_sandbox
from tests.sandbox import probes
from tests.support import require

# no_leaks; Docker sandboxes: one worker for them all (tests/conftest.py)
pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.xdist_group("docker")]

ROOT = Path(__file__).resolve().parents[2]


async def test_the_next_rollout_finds_nothing_the_last_one_wrote(
    backend: str, limits: SandboxLimits
) -> None:
    async with SandboxPool(1, backend=backend, limits=limits) as pool:
        async with pool.acquire() as box:
            first = box.id
            planted = await box.exec(["python3", "-c", probes.PLANT])
            done = set(probes.parse(planted.stdout))
            # The probe reached every kind of place: files, both IPC families.
            assert {"/work", "/tmp", "/dev/shm", "sysv-shm", "posix-mq"} <= done, planted
        async with pool.acquire() as box:
            assert box.id == first  # the same sandbox, reset: not a fresh one
            found = await box.exec(["python3", "-c", probes.FIND])
            assert found.exit_code == 0, found
            assert probes.parse(found.stdout) == [], found.stdout


def test_every_writable_place_is_one_the_reset_empties_and_has_a_quota(
    backend: str, limits: SandboxLimits
) -> None:
    with open_sandbox(backend, limits=limits) as box:
        scan = box.exec(["python3", "-c", probes.WRITABLE])
        places = probes.parse(scan.stdout)
        assert places, scan
        for place in places:
            assert place["point"] in box.scratch_dirs, place
            # tmpfs with a size of its own; an mqueue is bounded by RLIMIT_MSGQUEUE per uid.
            assert place["kind"] == "mqueue" or (
                place["kind"] == "tmpfs" and "size=" in place["options"]
            ), place


WITHOUT_ROOT = r"""
import json, sys
sys.path[:0] = [sys.argv[1]]
from sandbox import SandboxUnavailable, open_sandbox
import probes
try:
    box = open_sandbox("local").start()
except SandboxUnavailable as exc:
    print(json.dumps({"unavailable": str(exc)}))
    raise SystemExit
with box:
    places = probes.parse(box.exec(["python3", "-c", probes.WRITABLE]).stdout)
    planted = probes.parse(box.exec(["python3", "-c", probes.PLANT]).stdout)
    box.reset()
    found = probes.parse(box.exec(["python3", "-c", probes.FIND]).stdout)
    print(json.dumps({"scratch": box.scratch_dirs, "places": places, "planted": planted,
                      "found": found}))
"""


def test_the_same_holds_without_root(open_dir: Path) -> None:
    """Without root, bubblewrap's user namespace makes the programs' uid the owner of /dev (an
    unbounded tmpfs) and of the supervisor's keyrings: both must still be out of reach."""
    from sandbox.backends.local import _python

    require(os.geteuid() == 0 and shutil.which("setpriv") is not None, "root, to drop it")
    # The package and the probes where uid 65534 can read them, run by the system Python.
    shutil.copytree(ROOT / "sandbox", open_dir / "sandbox", ignore=shutil.ignore_patterns("*.pyc"))
    shutil.copy(Path(probes.__file__), open_dir / "probes.py")
    (open_dir / "run.py").write_text(WITHOUT_ROOT)
    for path in open_dir.rglob("*"):
        path.chmod(0o755)
    done = subprocess.run(
        [
            *("setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"),
            _python(),
            str(open_dir / "run.py"),
            str(open_dir),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd="/",
        env={"PATH": "/usr/bin:/bin", "TMPDIR": "/tmp", "LANG": "C.UTF-8"},
    )
    assert done.returncode == 0, done
    report = probes.parse(done.stdout.encode())
    require("unavailable" not in report, f"bubblewrap without root ({report.get('unavailable')})")
    assert {"/work", "/tmp", "/dev/shm", "user-keyring", "sysv-shm"} <= set(report["planted"])
    for place in report["places"]:
        assert place["point"] in report["scratch"], place
    assert report["found"] == [], report["found"]
