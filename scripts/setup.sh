#!/usr/bin/env bash
# Create .venv with both distributions editable: the environment SDK (sdk/pyproject.toml:
# prime_env, registry_index, sandbox) and prime-envhub (pyproject.toml: hub, CLI, trainer) with
# every extra and the test tools. The SDK comes from sdk/ only ([tool.uv.sources]), never an index.
# torch is pinned to the CPU wheel that pip finds on this machine's disk (a plain `torch`
# pulls a multi-GB CUDA build); uv then resolves the rest (pip's resolver backtracks for
# many minutes on the boto/aiobotocore pins that s3fs and moto bring).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check "torch==2.13.0" "uv>=0.4"
.venv/bin/uv pip install --quiet --python .venv/bin/python --overrides scripts/uv-overrides.txt -e ./sdk -e ".[all,dev]"
