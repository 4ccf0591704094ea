#!/usr/bin/env bash
# Run every test: installs what the suite needs (Python deps, Debian packages, daemons) first.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# vLLM for tests/e2e/test_vllm_engine.py, in a virtualenv of its own (3.5 GB, ~4 minutes the
# first time); kept under ~/.local/share/prime/engines, so later runs find it installed.
.venv/bin/prime engine install vllm
if [ "$(id -u)" = "0" ]; then
  bash scripts/system_deps.sh
fi
bash scripts/start_services.sh
# Four workers on two cores (pytest-xdist): with three, 42% of worker time was spent waiting on
# servers, subprocesses, Docker or uv, and a fourth fills more of it (the suite on 2 quiet
# cores: 14:42 with three, 13:39 with four, docs/benchmarks.md "The test suite"); each torch
# process runs one thread (tests/conftest.py). Each test module is one unit of work and an
# xdist_group mark keeps tests that share global state in one worker (tests/conftest.py).
# `-n 0` or `-p no:xdist` among the arguments runs the suite in this one process.
parallel=(-n 4 --dist loadgroup)
for arg in "$@"; do
  case "$arg" in *no:xdist) parallel=() ;; esac
done
exec .venv/bin/python -m pytest "${parallel[@]}" "$@"
