#!/usr/bin/env bash
# Run every test: installs what the suite needs (Python deps, Debian packages, daemons) first.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ "$(id -u)" = "0" ]; then
  bash scripts/system_deps.sh
fi
bash scripts/start_services.sh
# Two workers, one per core (pytest-xdist): most tests wait on servers, subprocesses, Docker
# or uv, so the two overlap; more workers than cores would slow the CPU-bound ones (torch
# training, mypy) and stretch their start-ups. Each test module is one unit of work and an
# xdist_group mark keeps tests that share global state in one worker (tests/conftest.py).
# `-n 0` or `-p no:xdist` among the arguments runs the suite in this one process.
parallel=(-n 2 --dist loadgroup)
for arg in "$@"; do
  case "$arg" in *no:xdist) parallel=() ;; esac
done
exec .venv/bin/python -m pytest "${parallel[@]}" "$@"
