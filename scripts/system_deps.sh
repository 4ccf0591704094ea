#!/usr/bin/env bash
# Debian packages the full test suite needs: Docker (sandboxes), PostgreSQL (hub database),
# Chromium (web page tests), debootstrap (sandbox image), bubblewrap (local sandbox), wamerican (wordle),
# jq (the CLI's stock-script compatibility tests).
set -euo pipefail
PKGS=(docker.io postgresql debootstrap bubblewrap wamerican chromium jq)
missing=()
for p in "${PKGS[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
