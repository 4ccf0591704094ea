"""What a program in a sandbox sees of the host: none of its files, not even its Python's.

The environment's own package data (python-code's hidden tests and reference solutions) stays
out of reach in both backends, and in the local backend, which shows the host's /usr, every
site-packages directory there is empty: an environment installed into the system Python would
otherwise hand its reference solutions to the code it scores.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from sandbox import SandboxLimits, open_sandbox
from tests.support import require

# no_leaks; Docker sandboxes: one worker for them all (tests/conftest.py)
PYTHON_CODE = Path(__file__).resolve().parents[2] / "builtin_envs" / "python-code"

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.xdist_group("docker")]


def test_the_environments_package_data_is_out_of_reach(backend: str, limits: SandboxLimits) -> None:
    data = PYTHON_CODE / "python_code" / "data" / "problems.jsonl"  # as an editable install
    assert "reference" in data.read_text()
    with open_sandbox(backend, limits=limits) as box:
        read = box.exec(["cat", str(data)])
        assert read.exit_code != 0 and b"reference" not in read.stdout, read.stderr


def test_the_hosts_python_packages_are_out_of_reach(limits: SandboxLimits) -> None:
    """An environment installed into the system Python, as `pip install` as root puts it."""
    from sandbox.backends.local import _python, bwrap_path

    require(bwrap_path() is not None, "bubblewrap (bwrap)")
    require(os.geteuid() == 0, "root (to install a package into the system Python)")
    version = subprocess.run(
        [_python(), "-c", "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    site = Path(f"/usr/local/lib/python{version}/dist-packages")
    created = not site.exists()
    package = site / f"prime_test_reference_{os.getpid()}"
    package.mkdir(parents=True)
    try:
        (package / "solutions.json").write_text('{"reference": "def f(): return 1"}')
        folders = [
            path
            for pattern in ("/usr/lib*/python3*/*-packages", "/usr/local/lib*/python3*/*-packages")
            for path in glob.glob(pattern)
            if os.path.isdir(path) and os.listdir(path)
        ]
        with open_sandbox("local", limits=limits) as box:
            for folder in folders:
                listing = box.exec(["ls", "-A", folder])
                assert listing.stdout == b"", (folder, listing)
            read = box.exec(["cat", str(package / "solutions.json")])
            assert b"reference" not in read.stdout, read
    finally:
        shutil.rmtree(site if created else package)
