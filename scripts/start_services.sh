#!/usr/bin/env bash
# Start the daemons the tests talk to, when they are installed and not yet running, and make
# sure the default sandbox image is in Docker (built once per machine, then found by tag).
# PostgreSQL is started per test session by the hub tests' fixtures (a throwaway cluster).
set -euo pipefail
cd "$(dirname "$0")/.."
if command -v dockerd >/dev/null 2>&1 && ! docker info >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ]; then
    mkdir -p /var/log
    # No bridge and no iptables: sandboxes run with network_mode=none, and this works inside
    # containers and VMs where dockerd may not manage the host's firewall.
    # setsid: the daemon must outlive the shell (and process group) that started it.
    setsid nohup dockerd --bridge=none --iptables=false --ip-masq=false >/var/log/dockerd.log 2>&1 &
    for _ in $(seq 1 120); do
      docker info >/dev/null 2>&1 && break
      sleep 0.5
    done
    if ! docker info >/dev/null 2>&1; then
      echo "dockerd did not start; last lines of /var/log/dockerd.log:" >&2
      tail -n 20 /var/log/dockerd.log >&2 || true
      [ "${CI:-}" = "true" ] && exit 1
    fi
  fi
fi
if docker info >/dev/null 2>&1 && [ -x .venv/bin/prime ]; then
  # debootstrap + docker import (a few minutes, once per machine); Docker never pulls.
  .venv/bin/prime sandbox build-image
fi
