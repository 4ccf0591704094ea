#!/usr/bin/env bash
# Run every test: installs what the suite needs (Python deps, Debian packages, daemons) first.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ "$(id -u)" = "0" ]; then
  bash scripts/system_deps.sh
fi
bash scripts/start_services.sh
exec .venv/bin/python -m pytest "$@"
