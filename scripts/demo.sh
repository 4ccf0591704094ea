#!/usr/bin/env bash
# The README's main job, on embedded defaults: set up, start a local hub (SQLite + local blobs)
# on a free loopback port, create a user and a token, scaffold an example environment, publish
# it with `prime env push`, install it BY NAME with `prime env install` into a fresh virtualenv,
# load it there, and print what happened. Stops the hub at the end; exits non-zero on any failure.
#
# Settings are kept in a temporary directory, so your own ~/.config/prime is never touched, and
# the environments it installs into .venv are uninstalled again at the end.
# PRIME_DEMO_KEEP=1 keeps the hub's data directory and logs for a look afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

step "Setting up .venv (scripts/setup.sh)"
bash scripts/setup.sh
PY=$ROOT/.venv/bin/python
PRIME=$ROOT/.venv/bin/prime

WORK=$(mktemp -d "${TMPDIR:-/tmp}/prime-demo.XXXXXX")
export XDG_CONFIG_HOME=$WORK/config
unset PRIME_HUB_URL PRIME_API_BASE_URL PRIME_API_KEY PRIME_OWNER
HUB_PID=""
# The demo installs hub environments into .venv; take back the ones that were not there before,
# so the checkout's venv (which the test suite also uses) is left as it was found.
DEMO_ENVS="reverse-text arithmetic"
NEW_ENVS=""
for dist in $DEMO_ENVS; do
  "$PY" -c "import importlib.metadata as m, sys; m.version(sys.argv[1])" "$dist" 2>/dev/null \
    || NEW_ENVS="$NEW_ENVS $dist"
done

cleanup() {
  status=$?
  for dist in $NEW_ENVS; do
    "$ROOT/.venv/bin/uv" pip uninstall --quiet --python "$PY" "$dist" 2>/dev/null || true
  done
  if [ -n "$HUB_PID" ] && kill -0 "$HUB_PID" 2>/dev/null; then
    kill "$HUB_PID" 2>/dev/null || true
    wait "$HUB_PID" 2>/dev/null || true
    echo "hub stopped"
  fi
  if [ "$status" -ne 0 ] && [ -f "$WORK/hub.log" ]; then
    echo "--- last lines of the hub log ($WORK/hub.log) ---" >&2
    tail -n 30 "$WORK/hub.log" >&2 || true
  fi
  if [ "${PRIME_DEMO_KEEP:-0}" = "1" ] || [ "$status" -ne 0 ]; then
    echo "demo files kept in $WORK"
  else
    rm -rf "$WORK"
  fi
  if [ "$status" -ne 0 ]; then
    printf '\n\033[31mDEMO FAILED (exit %s)\033[0m\n' "$status" >&2
  fi
  exit "$status"
}
trap cleanup EXIT

PORT=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
HUB=http://127.0.0.1:$PORT
DATA=$WORK/hub-data

step "Starting a local hub at $HUB (data in $DATA)"
"$PRIME" hub serve --host 127.0.0.1 --port "$PORT" --data-dir "$DATA" >"$WORK/hub.log" 2>&1 &
HUB_PID=$!
"$PY" - "$HUB" "$HUB_PID" <<'EOF'
import os, sys, time
import httpx
url, pid = sys.argv[1], int(sys.argv[2])
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        sys.exit("the hub exited during start-up")
    try:
        if httpx.get(url + "/healthz", timeout=2).status_code == 200:
            sys.exit(0)
    except httpx.HTTPError:
        pass
    time.sleep(0.3)
sys.exit("the hub did not answer within 60 s")
EOF
echo "hub is up (pid $HUB_PID)"

step "Creating user 'demo' and an API token"
"$PRIME" hub user add demo --data-dir "$DATA"
TOKEN=$("$PRIME" hub token create demo --data-dir "$DATA" | tail -n 1)
"$PRIME" login --url "$HUB" --token "$TOKEN"
"$PRIME" whoami

step "Publishing the built-in environments under prime/ (prime hub seed)"
"$PRIME" hub seed --url "$HUB" --data-dir "$DATA"
"$PRIME" env list --owner prime

step "Installing one by name (prime env install prime/reverse-text)"
"$PRIME" env install prime/reverse-text

step "Evaluating it with the local model, offline (prime eval run ... -m local/smollm2-135m --push)"
"$PRIME" eval run prime/reverse-text -m local/smollm2-135m -n 3 -r 2 -t 64 \
  -o "$WORK/outputs" --push --public

step "The leaderboard on the hub (API and web page)"
"$PY" - "$HUB" <<'EOF'
import sys
import httpx
hub = sys.argv[1]
board = httpx.get(f"{hub}/api/v1/environmentshub/prime/reverse-text/leaderboard", timeout=30)
board.raise_for_status()
rows = board.json()["data"]
if not rows:
    sys.exit("the pushed run is not on the leaderboard")
for row in rows:
    stderr = "n/a" if row["stderr"] is None else f"{row['stderr']:.3f}"
    served = row.get("served_model")
    served = f" (served as {served})" if served and served != row["model"] else ""
    print(f"  #{row['rank']} {row['model']}{served}: mean reward {row['mean_reward']:.3f} ± {stderr} "
          f"(n={row['n']}, rollouts={row['rollouts']}, errors={row['errors']}, "
          f"env version {row['env_version']})")
page = httpx.get(f"{hub}/prime/reverse-text", timeout=30)
page.raise_for_status()
if "smollm2" not in page.text:
    sys.exit("the web page does not show the run")
print(f"  web page: {hub}/prime/reverse-text")
EOF

step "Training on a hub environment (prime train prime/arithmetic: its recipe, 8 steps, --push)"
# The environment's own recipe (arithmetic/train/smollm2-135m.toml: 4 problems x 8 a step,
# greedy evals of its 50 held-out problems at steps 0, 4 and 8), cut from 32 steps to 8 with a
# constant learning rate (the recipe's cosine would decay to 0 within the 8 steps); drop those
# two overrides to run the whole recipe.
"$PRIME" train prime/arithmetic --max-steps 8 --trainer.scheduler.type constant \
  --monitors.live false -o "$WORK/outputs" --run-name demo --push --public
RUN_DIR=$(ls -d "$WORK"/outputs/train/*/demo* | head -n 1)
"$PRIME" train plot "$RUN_DIR" -o "$WORK/train.png"
"$PY" - "$HUB" <<'EOF'
import sys
import httpx
board = httpx.get(f"{sys.argv[1]}/api/v1/environmentshub/prime/arithmetic/leaderboard", timeout=30)
board.raise_for_status()
rows = board.json()["data"]
for row in rows:
    print(f"  #{row['rank']} {row['model']}: mean reward {row['mean_reward']:.3f} (n={row['n']})")
models = [row["model"] for row in rows]
if not any("/step_" in model for model in models):
    sys.exit("the training run's evals are not on the leaderboard")
EOF

step "The trained policy against its base, outside training (prime train export; prime eval run --adapter)"
"$PRIME" train export "$RUN_DIR" -o "$WORK/policy"
"$PRIME" eval run prime/arithmetic -m local/smollm2-135m --adapter "$WORK/policy" \
  -a '{"difficulty": 1, "num_train_examples": 50, "num_eval_examples": 50}' -n 50 -r 1 -t 32 -T 0 \
  -o "$WORK/adapter-eval"
TRAIN_SUMMARY=$("$PY" - "$RUN_DIR" "$WORK/adapter-eval" <<'EOF'
import json
import sys
from pathlib import Path

run, out = Path(sys.argv[1]), Path(sys.argv[2])
evals = [json.loads(line) for line in (run / "evals.jsonl").read_text().splitlines()]
[results] = out.rglob("results.jsonl")
rows = [json.loads(line) for line in results.read_text().splitlines()]
rows = [r for r in rows if r["error"] is None]  # an infrastructure error is not a wrong answer
adapter = sum(r["rewards"]["correct"] for r in rows) / len(rows)
say = lambda text: print(text, file=sys.stderr)  # noqa: E731 (stdout is the one-line summary)
say("held-out problems answered correctly (greedy; the same 50 problems each time):")
for e in evals:
    say(f"  policy after {e['policy']} steps (the trainer's eval): {e['eval/correct']:.2f}"
        f"  (run CPU-s by then: {e['cpu_s']:.0f})")
say(f"  the exported policy (prime eval run --adapter): {adapter:.2f} (n={len(rows)})")
base, last = evals[0]["eval/correct"], evals[-1]["eval/correct"]
verdict = "better than" if last > base else "NOT better than"
say(f"  => trained {evals[-1]['policy']} steps: {verdict} its base, {base:.2f} -> {last:.2f}")
print(f"held-out correct {base:.2f} -> {last:.2f}")
EOF
)

step "Scaffolding an example environment (prime env init hello-env)"
"$PRIME" env init hello-env --path "$WORK/src"

step "Publishing it (prime env push)"
"$PRIME" env push "$WORK/src/hello-env" --visibility public
"$PRIME" env list
"$PRIME" env info demo/hello-env

step "Creating an empty virtualenv (what a new environment user has)"
"$ROOT/.venv/bin/uv" venv --quiet --python "$PY" "$WORK/venv"

step "Installing it by name (prime env install demo/hello-env@0.1.0): the SDK comes from the hub"
"$PRIME" env install demo/hello-env@0.1.0 --python "$WORK/venv/bin/python"

step "Loading it in the fresh virtualenv and scoring a sample answer"
"$WORK/venv/bin/python" -I - <<'EOF'  # -I: the venv's own packages, not this checkout's
import importlib.metadata as md
import prime_env

dist = md.distribution("hello-env")
print(f"installed: {dist.metadata['Name']} {dist.version} from {dist.locate_file('')}")
env = prime_env.load("demo/hello-env")
print(f"loaded:    {env!r}")
task = env.tasks[0]
print(f"task 0:    {task.prompt[-1]['content']!r} -> answer {task.answer!r}")
import hello_env
good = hello_env.correct_answer([{"role": "assistant", "content": f"The answer is {task.answer}"}], task.answer)
bad = hello_env.correct_answer([{"role": "assistant", "content": "No idea"}], task.answer)
print(f"reward:    correct reply {good}, wrong reply {bad}")
assert (good, bad) == (1.0, 0.0)
installed = {d.metadata["Name"].lower() for d in md.distributions()}
heavy = installed & {"fastapi", "sqlmodel", "alembic", "twine", "uvicorn", "torch", "prime-envhub"}
print(f"sdk:       prime-envhub-sdk {md.version('prime-envhub-sdk')} ({len(installed)} packages, none of the hub's)")
assert not heavy, f"the environment's venv has hub dependencies: {sorted(heavy)}"
EOF

step "Pushing the same content again is refused (versions are immutable)"
if "$PRIME" env push "$WORK/src/hello-env"; then
  echo "ERROR: an unchanged push was accepted" >&2
  exit 1
fi

printf '\n\033[32mDEMO OK\033[0m: on a local hub at %s: seeded the built-ins, evaluated prime/reverse-text with the local model and pushed the run to its leaderboard; trained on prime/arithmetic for 8 steps (%s) and pushed its before/after evals; published demo/hello-env 0.1.0, installed it by name (with the SDK from the hub) into an empty virtualenv and loaded it.\n' "$HUB" "$TRAIN_SUMMARY"
