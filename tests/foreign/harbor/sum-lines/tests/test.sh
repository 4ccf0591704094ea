#!/bin/bash
# Writes reward.json: the reward and a metric; exits non-zero when the answer is wrong (the
# reward file, not the exit status, decides the reward).
mkdir -p /logs/verifier
python3 - <<'PY'
import json
from pathlib import Path
expected = sum(int(line) for line in Path("/app/numbers.txt").read_text().split())
try:
    got = int(Path("/app/sum.txt").read_text().strip())
except (OSError, ValueError):
    got = None
Path("/logs/verifier/reward.json").write_text(json.dumps(
    {"reward": float(got == expected), "answered": float(got is not None)}
))
PY
[ "$(cat /app/sum.txt 2>/dev/null)" = "15" ]
