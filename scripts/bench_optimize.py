"""Prompt optimisation benchmark: `prime eval optimize` with the local model, gain on held-out.

`prime eval optimize builtin_envs/arithmetic -m local/smollm2-135m --reflection-model
local/smollm2-135m` (SmolLM2-135M-Instruct on CPU answers, greedy, and also writes the prompts:
the weakest reflection model there is, so this is a floor, not what a strong reflection model
gets). The baseline is measured in the same run on the same held-out tasks: the environment's
own system prompt. Printed: held-out reward before and after (mean ± SE), their ratio and
difference, what the search kept and dropped, rollouts spent, wall time and the load.

Usage: `python scripts/bench_optimize.py [--budget 48] [--quick] [--write-docs]`; with
`--write-docs` it replaces the `## Prompt optimisation` section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PRIME = Path(sys.executable).with_name("prime")
SECTION = "## Prompt optimisation"


def optimize(args: argparse.Namespace, out: Path) -> tuple[dict[str, Any], float]:
    command = [
        str(PRIME), "eval", "optimize", str(ROOT / "builtin_envs" / "arithmetic"),
        "-a", '{"difficulty": 1, "num_eval_examples": 40}',
        "-m", "local/smollm2-135m", "--reflection-model", "local/smollm2-135m",
        "--budget", str(args.budget), "--minibatch", str(args.minibatch),
        "--val-size", str(args.val_size), "--test-size", str(args.test_size),
        "-t", str(args.max_tokens), "-T", "0", "--reflection-max-tokens", str(args.reflection_tokens),
        "--seed", str(args.seed), "-o", str(out), "--output", "json",
    ]  # fmt: skip
    started = time.monotonic()
    proc = subprocess.run(
        command,
        cwd=out,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.monotonic() - started
    if proc.returncode != 0:
        sys.exit(f"prime eval optimize failed:\n{proc.stderr[-3000:]}")
    print(proc.stderr, file=sys.stderr)
    return json.loads(proc.stdout), elapsed


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def report(result: dict[str, Any], elapsed: float, args: argparse.Namespace, loads: str) -> str:
    before, after = result["heldout"]["before"], result["heldout"]["after"]
    b, a = before["reward_mean"], after["reward_mean"]
    ratio = "-" if not b else f"{a / b:.2f}"
    command = (
        f"python scripts/bench_optimize.py --budget {args.budget} --minibatch {args.minibatch} "
        f"--val-size {args.val_size} --test-size {args.test_size} --max-tokens {args.max_tokens}"
        + (" --write-docs" if args.write_docs else "")
    )
    best = result["best_prompt"].replace("\n", " ").replace("|", "\\|")
    return f"""{SECTION}

`{command}` on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC (CPython {sys.version.split()[0]}, 2 CPUs shared with other work; 1-minute load average {loads}). `prime eval optimize` on `prime/arithmetic` (difficulty 1), SmolLM2-135M-Instruct on CPU as both the model (greedy, {args.max_tokens} tokens) and the reflection model (sampled, {args.reflection_tokens} tokens): a floor, the weakest reflection model there is. Splits: {result["splits"]["train"]} train, {result["splits"]["validation"]} validation, {result["splits"]["heldout"]} held-out tasks; the baseline is the environment's own system prompt on the same held-out tasks in the same run.

| prompt | held-out reward (mean ± se) | validation | errors |
|---|---|---|---|
| the environment's | {fmt(b)} ± {fmt(before["reward_stderr"])} | {fmt(result["val_mean"]["seed"])} | {before["errors"]} |
| optimised (candidate {result["best_candidate"]}) | {fmt(a)} ± {fmt(after["reward_stderr"])} | {fmt(result["val_mean"]["best"])} | {after["errors"]} |

Gain on held-out: **{a - b:+.3f}** (ratio {ratio}); {result["candidates"] - 1} proposals kept, {result["rejected"]} dropped (no better than their parent on the minibatch), {result["rollouts_used"]} of {args.budget} rollouts spent, {elapsed:.0f} s wall. Best prompt: "{best}".
"""


def write_docs(section: str) -> None:
    path = ROOT / "docs" / "benchmarks.md"
    text = path.read_text()
    start = text.find(SECTION + "\n")
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        end = text.find("\n## ", start + len(SECTION))
        rest = "" if end < 0 else text[end:]
        text = text[:start] + section.rstrip("\n") + "\n" + rest
    path.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budget", type=int, default=48)
    parser.add_argument("--minibatch", type=int, default=4)
    parser.add_argument("--val-size", type=int, default=8)
    parser.add_argument("--test-size", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--reflection-tokens", type=int, default=160)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="a tiny run: the script works")
    parser.add_argument("--write-docs", action="store_true", help="update docs/benchmarks.md")
    args = parser.parse_args()
    if args.quick:
        if args.write_docs:
            parser.error("--quick measures nothing worth publishing; drop --write-docs")
        args.budget, args.minibatch, args.val_size, args.test_size = 6, 1, 2, 2
        args.max_tokens, args.reflection_tokens = 8, 16
    load_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        result, elapsed = optimize(args, Path(tmp))
    loads = f"{load_start:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"
    section = report(result, elapsed, args, loads)
    print(section)
    if args.write_docs:
        write_docs(section)


if __name__ == "__main__":
    main()
