"""The suite's parallel safety holds: tests of one xdist_group run in one worker.

WHY a test of the test runner: the Docker tests count containers Docker-wide and the training
tests start sandboxes of their own, so two of them at once in two workers fail each other
(a container of one counted as left over by the other). Their xdist_group keeps them in one
worker, but pytest 9.2 silently broke xdist's grouping (pytest-dev/pytest-xdist#1386: the
group is written into the node id, which 9.2 no longer reads back), and CI failed on it only
when two such tests happened to overlap. This runs tests/conftest.py's scheduler, with the
installed pytest and xdist, on four small modules and checks where each test ran.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GROUPED = 'import pytest\n\npytestmark = pytest.mark.xdist_group("shared")\n'
UNGROUPED = "import pytest\n"
BODY = """
import os


def _record(name: str) -> None:
    with open(os.environ["WHERE_RAN"], "a") as out:
        out.write(f"{name} {os.environ['PYTEST_XDIST_WORKER']}\\n")


def test_one() -> None:
    _record(__name__)


def test_two() -> None:
    _record(__name__)
"""


def test_an_xdist_group_runs_in_one_worker(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "pytest.ini").write_text("[pytest]\n")  # this directory is the rootdir
    (suite / "conftest.py").write_text(
        "from tests.conftest import (  # noqa: F401\n"
        "    pytest_collection_modifyitems, pytest_configure, pytest_xdist_make_scheduler,\n"
        ")\n"
    )
    for name, head in [("a", GROUPED), ("b", GROUPED), ("c", UNGROUPED), ("d", UNGROUPED)]:
        (suite / f"test_{name}.py").write_text(head + BODY)
    where = tmp_path / "where.txt"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WHERE_RAN": str(where)}
    env.pop("PYTEST_XDIST_WORKER", None)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-q",
         "-p", "no:cacheprovider", str(suite)],
        check=False, cwd=suite, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    workers: dict[str, set[str]] = {}
    for line in where.read_text().splitlines():
        module, worker = line.split()
        workers.setdefault(module, set()).add(worker)
    assert sorted(workers) == ["test_a", "test_b", "test_c", "test_d"]
    assert all(len(ran_in) == 1 for ran_in in workers.values()), workers  # a module: one worker
    assert workers["test_a"] == workers["test_b"], f"the group was split: {workers}"
