#!/usr/bin/env bash
# Run every test: installs what the suite needs (Python deps, Debian packages, daemons) first.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ "$(id -u)" = "0" ]; then
  bash scripts/system_deps.sh
fi
bash scripts/start_services.sh
# Three workers on two cores (pytest-xdist): a third of a worker's time is spent waiting on
# servers, subprocesses, Docker or uv, and a third worker fills it (26:20 against 29:18 for
# two on 2 cores, docs/benchmarks.md "The test suite"); each torch process runs one thread
# (tests/conftest.py). Each test module is one unit of work and an xdist_group mark keeps
# tests that share global state in one worker (tests/conftest.py).
# `-n 0` or `-p no:xdist` among the arguments runs the suite in this one process.
parallel=(-n 3 --dist loadgroup)
for arg in "$@"; do
  case "$arg" in *no:xdist) parallel=() ;; esac
done
exec .venv/bin/python -m pytest "${parallel[@]}" "$@"
