#!/usr/bin/env bash
# Create .venv with both distributions editable: the environment SDK (sdk/pyproject.toml:
# prime_env, local_model, registry_index, sandbox) and prime-envhub (pyproject.toml: hub, CLI,
# trainer) with every extra and the test tools. The SDK comes from sdk/ only ([tool.uv.sources]),
# never an index.
# torch is pinned to the CPU wheel that pip finds on this machine's disk (a plain `torch`
# pulls a multi-GB CUDA build); uv then resolves the rest (pip's resolver backtracks for
# many minutes on the boto/aiobotocore pins that s3fs and moto bring), under the versions the
# suite last passed with (scripts/constraints.txt), so CI runs what was tested.
# Each step says what it does and how long it took; uv prints what it resolved and installed
# (with progress bars on a terminal), so a first setup is never minutes of silence.
# Bytecode is compiled at install time, as pip does and uv does only when asked: a process that
# cannot write __pycache__ (PYTHONDONTWRITEBYTECODE, a read-only tree) would otherwise compile
# every module it imports on every start (`prime eval run` started in 1.75 CPU-s, 0.75 with it).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
step() { printf '==> %s\n' "$*"; }
started=$SECONDS
if [ ! -x .venv/bin/python ]; then
  step "creating .venv with $("$PY" --version)"
  "$PY" -m venv .venv
fi
step "installing CPU torch 2.13.0 and uv (pip; torch comes from this machine's disk)"
.venv/bin/python -m pip install --quiet --disable-pip-version-check --constraint scripts/constraints.txt \
  "torch==2.13.0" "uv>=0.4"
step "installing prime-envhub-sdk and prime-envhub, editable, with every extra and the test tools (uv)"
.venv/bin/uv pip install --python .venv/bin/python --compile-bytecode --overrides scripts/uv-overrides.txt \
  --constraints scripts/constraints.txt -e ./sdk -e ".[all,dev]"
STOCK=.venv/wheelhouse/stock-prime-0.18.0
if [ ! -f "$STOCK/.complete" ]; then
  # The stock `prime` client (PyPI prime 0.18.0) and what an environment's SDK needs, as files:
  # tests/e2e/test_stock_client.py serves them as the "normal index" on loopback and installs the
  # stock client into a venv of its own (it is never installed here: its package is also named
  # prime_cli). docs/cli.md says what it does against this hub.
  step "fetching the stock prime 0.18.0 client and the SDK's dependencies as wheels (pip wheel) for its test"
  .venv/bin/python -c 'import tomllib; print("\n".join(tomllib.load(open("sdk/pyproject.toml", "rb"))["project"]["dependencies"]))' \
    > .venv/wheelhouse-sdk-requirements.txt
  .venv/bin/python -m pip wheel --quiet --disable-pip-version-check --wheel-dir "$STOCK" \
    "prime==0.18.0" -r .venv/wheelhouse-sdk-requirements.txt
  touch "$STOCK/.complete"
fi
FOREIGN=.venv/wheelhouse/foreign-1
if [ ! -f "$FOREIGN/.complete" ]; then
  # Environments of other frameworks run in virtualenvs of their own (prime_env.remote); their
  # tests install verifiers 0.4.0 (and, next, openenv-core 0.3.0) with every dependency from these
  # files (UV_FIND_LINKS, no index), and verifiers' chat harness builds its uv script
  # environment from them too, so nothing is downloaded while the tests run.
  step "fetching verifiers 0.4.0 and openenv-core 0.3.0 with their dependencies as wheels (pip wheel) for the foreign-environment tests"
  .venv/bin/python -m pip wheel --quiet --disable-pip-version-check --wheel-dir "$FOREIGN" "verifiers==0.4.0"
  .venv/bin/python -m pip wheel --quiet --disable-pip-version-check --wheel-dir "$FOREIGN" "openenv-core[core]==0.3.0"
  touch "$FOREIGN/.complete"
fi
step "compiling the editable packages' bytecode"
.venv/bin/python -m compileall -q -j 0 prime_cli hub_client prime_env hub_server registry_index sandbox \
  engines trainer_bridge builtin_envs local_model testing >/dev/null
step "setup done in $((SECONDS - started)) s: .venv/bin/prime is ready"
