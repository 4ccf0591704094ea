"""Where the test suite's time goes: CPU-seconds and wall seconds per test, and their sums.

    SUITE_CPU_DIR=/tmp/suite-cpu bash .ci/run -p scripts.suite_cpu   # record (every worker)
    python scripts/suite_cpu.py /tmp/suite-cpu [--top 40]              # report

As a pytest plugin it appends one JSON line per test to `$SUITE_CPU_DIR/<worker>.jsonl`: the
worker's own CPU and that of the children it waited for (a `prime train` and its trainer, a
hub started by a fixture counts at its teardown), wall time and start. Containers' CPU is not
counted (the Docker daemon runs them). The report prints the totals, per-worker spans (an
unbalanced tail shows there) and the costliest tests and units (xdist_group or module).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import time
from collections import defaultdict
from collections.abc import Generator
from pathlib import Path
from typing import IO, Any

import pytest

_out: IO[str] | None = None


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    waited = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + waited.ru_utime + waited.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None]:
    """Time one test's setup, call and teardown."""
    global _out
    directory = os.environ.get("SUITE_CPU_DIR")
    if not directory:
        yield
        return
    if _out is None:
        Path(directory).mkdir(parents=True, exist_ok=True)
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        _out = (Path(directory) / f"{worker}.jsonl").open("a")
    cpu, wall, start = _cpu(), time.monotonic(), time.time()
    yield
    row = {"id": item.nodeid, "cpu": round(_cpu() - cpu, 2), "start": start,
           "wall": round(time.monotonic() - wall, 2)}  # fmt: skip
    _out.write(json.dumps(row) + "\n")
    _out.flush()


_XDIST_GROUP = re.compile(r"@([^@]+)$")  # pytest-xdist's `--dist loadgroup` suffix


def _unit(nodeid: str) -> str:
    group = _XDIST_GROUP.search(nodeid)
    return group.group(1) if group else nodeid.split("::", 1)[0]


def report(directory: Path, top: int) -> None:
    """Print the totals, each worker's span and the costliest tests and units."""
    rows: list[dict[str, Any]] = []
    for path in sorted(directory.glob("*.jsonl")):
        own = [json.loads(line) for line in path.read_text().splitlines()]
        if own:
            span = own[-1]["start"] + own[-1]["wall"] - own[0]["start"]
            cpu = sum(r["cpu"] for r in own)
            print(f"{path.stem}: {len(own)} tests, span {span:.0f} s, CPU {cpu:.0f} s")
        rows += own
    print(f"all: {len(rows)} tests, CPU {sum(r['cpu'] for r in rows):.0f} s, "
          f"wall summed {sum(r['wall'] for r in rows):.0f} s")  # fmt: skip
    units: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for row in rows:
        units[_unit(row["id"])][0] += row["cpu"]
        units[_unit(row["id"])][1] += row["wall"]
    print(f"\n{'CPU s':>7} {'wall s':>7}  unit")
    for name, (cpu, wall) in sorted(units.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"{cpu:7.1f} {wall:7.1f}  {name}")
    print(f"\n{'CPU s':>7} {'wall s':>7}  test")
    for row in sorted(rows, key=lambda r: -r["cpu"])[:top]:
        print(f"{row['cpu']:7.1f} {row['wall']:7.1f}  {row['id']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args()
    report(args.directory, args.top)


if __name__ == "__main__":
    main()
