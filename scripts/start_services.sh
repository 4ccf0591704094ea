#!/usr/bin/env bash
# Start the daemons the tests talk to, when they are installed and not yet running.
# PostgreSQL is started per test session by the hub tests' fixtures (a throwaway cluster).
set -euo pipefail
if command -v dockerd >/dev/null 2>&1 && ! docker info >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ]; then
    mkdir -p /var/log
    nohup dockerd --bridge=none --iptables=false --ip-masq=false >/var/log/dockerd.log 2>&1 &
    for _ in $(seq 1 60); do
      docker info >/dev/null 2>&1 && break
      sleep 0.5
    done
  fi
fi
