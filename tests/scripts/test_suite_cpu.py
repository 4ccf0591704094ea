"""scripts/suite_cpu.py: the per-test record it writes as a plugin, and the report it prints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from scripts.suite_cpu import report

ROOT = Path(__file__).resolve().parents[2]


def test_the_plugin_records_each_test_and_the_report_sums_units(tmp_path: Path) -> None:
    (tmp_path / "test_busy.py").write_text(
        "import subprocess, sys\n"
        "def test_spins():\n"
        "    subprocess.run([sys.executable, '-c', 'sum(range(3_000_000))'], check=True)\n"
        "def test_idles():\n"
        "    pass\n"
    )  # fmt: skip
    record = tmp_path / "record"
    # not an xdist worker itself, whatever runs this test: its file is main.jsonl
    environ = {k: v for k, v in os.environ.items() if k != "PYTEST_XDIST_WORKER"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "scripts.suite_cpu", "-p", "no:cacheprovider",
         str(tmp_path / "test_busy.py")],
        cwd=ROOT, env={**environ, "SUITE_CPU_DIR": str(record), "PYTHONPATH": str(ROOT)},
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [json.loads(line) for line in (record / "main.jsonl").read_text().splitlines()]
    by_name = {row["id"].rsplit("::", 1)[1]: row for row in rows}
    assert set(by_name) == {"test_spins", "test_idles"}
    assert by_name["test_spins"]["cpu"] > by_name["test_idles"]["cpu"]  # the child's CPU counts


def test_report_prints_totals_spans_and_units(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [
        {"id": "tests/a.py::t1", "cpu": 2.0, "wall": 3.0, "start": 100.0},
        {"id": "tests/a.py::t2@docker", "cpu": 1.0, "wall": 5.0, "start": 103.0},
        {"id": "tests/b.py::t3@docker", "cpu": 4.0, "wall": 4.0, "start": 108.0},
    ]
    (tmp_path / "gw0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    report(tmp_path, top=5)
    out = capsys.readouterr().out
    assert "gw0: 3 tests, span 12 s, CPU 7 s" in out
    assert "all: 3 tests, CPU 7 s, wall summed 12 s" in out
    assert "    5.0     9.0  docker" in out and "    2.0     3.0  tests/a.py" in out
