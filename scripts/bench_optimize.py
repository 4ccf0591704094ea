"""Prompt optimisation benchmark: `prime eval optimize` with the local model, gain on held-out.

For each environment, `prime eval optimize builtin_envs/ENV -m local/smollm2-135m
--reflection-model local/smollm2-135m` (SmolLM2-135M-Instruct on CPU answers, greedy, and also
writes the prompts: the weakest reflection model there is, so this is a floor, not what a
strong reflection model gets). The baseline is measured in the same run on the same held-out
tasks: the environment's own system prompt. reverse-text's reward is dense (character
similarity), so a prompt that helps a little shows; arithmetic's is 0 or 1. Printed per
environment: held-out reward before and after (mean ± SE), their ratio and difference, what
the search kept and dropped, rollouts spent, wall time; and the load.

Usage: `python scripts/bench_optimize.py [--env reverse-text --env arithmetic] [--budget 48]
[--quick] [--write-docs]`; with `--write-docs` it replaces the `## Prompt optimisation`
section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PRIME = Path(sys.executable).with_name("prime")
SECTION = "## Prompt optimisation"


@dataclass(frozen=True)
class Target:
    env_args: dict[str, Any]
    max_tokens: int  # per answer: enough for a whole answer of this environment


TARGETS = {
    "reverse-text": Target({"num_eval_examples": 40}, 96),
    "arithmetic": Target({"difficulty": 1, "num_eval_examples": 40}, 48),
}


def optimize(env: str, args: argparse.Namespace, out: Path) -> tuple[dict[str, Any], float, int]:
    target = TARGETS[env]
    max_tokens = args.max_tokens or target.max_tokens
    command = [
        str(PRIME), "eval", "optimize", str(ROOT / "builtin_envs" / env),
        "-a", json.dumps(target.env_args),
        "-m", "local/smollm2-135m", "--reflection-model", "local/smollm2-135m",
        "--budget", str(args.budget), "--minibatch", str(args.minibatch),
        "--val-size", str(args.val_size), "--test-size", str(args.test_size),
        "-t", str(max_tokens), "-T", "0", "--reflection-max-tokens", str(args.reflection_tokens),
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
        sys.exit(f"prime eval optimize {env} failed:\n{proc.stderr[-3000:]}")
    print(proc.stderr, file=sys.stderr)
    return json.loads(proc.stdout), elapsed, max_tokens


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def env_report(env: str, result: dict[str, Any], elapsed: float, max_tokens: int) -> str:
    before, after = result["heldout"]["before"], result["heldout"]["after"]
    b, a = before["reward_mean"], after["reward_mean"]
    ratio = "-" if not b else f"{a / b:.2f}"
    best = result["best_prompt"].replace("\n", " ").replace("|", "\\|")
    splits = result["splits"]
    reading = (
        " No signal: the model scored 0 on every task it was shown, under the environment's "
        "prompt and every proposal, so no proposal could beat its parent on a minibatch and the "
        "search kept the environment's prompt."
        if not b and not a and result["candidates"] == 1
        else ""
    )
    return f"""### prime/{env} (`-a '{json.dumps(TARGETS[env].env_args)}'`, {max_tokens} tokens an answer)

Splits: {splits["train"]} train, {splits["validation"]} validation, {splits["heldout"]} held-out tasks.

| prompt | held-out reward (mean ± se) | validation | errors |
|---|---|---|---|
| the environment's (baseline) | {fmt(b)} ± {fmt(before["reward_stderr"])} | {fmt(result["val_mean"]["seed"])} | {before["errors"]} |
| optimised (candidate {result["best_candidate"]}) | {fmt(a)} ± {fmt(after["reward_stderr"])} | {fmt(result["val_mean"]["best"])} | {after["errors"]} |

Gain on held-out: **{a - b:+.3f}** (ratio {ratio}); {result["candidates"] - 1} proposals kept, {result["rejected"]} dropped (no better than their parent on the minibatch), {result["rollouts_used"]} rollouts spent, {elapsed:.0f} s wall. Best prompt: "{best}".{reading}
"""


def report(parts: list[str], args: argparse.Namespace, loads: str) -> str:
    command = (
        "python scripts/bench_optimize.py "
        + " ".join(f"--env {env}" for env in args.env)
        + f" --budget {args.budget} --minibatch {args.minibatch} --val-size {args.val_size} "
        f"--test-size {args.test_size}"
        + (f" --max-tokens {args.max_tokens}" if args.max_tokens else "")
        + (" --write-docs" if args.write_docs else "")
    )
    body = "\n".join(parts)
    return f"""{SECTION}

`{command}` on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC (CPython {sys.version.split()[0]}, 2 CPUs shared with other work; 1-minute load average {loads}). `prime eval optimize` with SmolLM2-135M-Instruct on CPU as both the model (greedy) and the reflection model (sampled, {args.reflection_tokens} tokens): a floor, the weakest reflection model there is. Budget {args.budget} rollouts per environment, minibatch {args.minibatch}. The baseline is the environment's own system prompt on the same held-out tasks in the same run. The CLI's own gain (0.000 -> 1.000 held-out) is tested with a scripted reflection model on a prompt-sensitive environment (`tests/e2e/test_eval_optimize.py`); this measures what the local model alone gets.

{body}"""


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
    parser.add_argument("--env", action="append", choices=sorted(TARGETS))
    parser.add_argument("--budget", type=int, default=48)
    parser.add_argument("--minibatch", type=int, default=4)
    parser.add_argument("--val-size", type=int, default=8)
    parser.add_argument("--test-size", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, help="per answer (default: the env's)")
    parser.add_argument("--reflection-tokens", type=int, default=160)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="a tiny run: the script works")
    parser.add_argument("--write-docs", action="store_true", help="update docs/benchmarks.md")
    args = parser.parse_args()
    args.env = args.env or ["reverse-text", "arithmetic"]
    if args.quick:
        if args.write_docs:
            parser.error("--quick measures nothing worth publishing; drop --write-docs")
        args.env = args.env[:1]
        args.budget, args.minibatch, args.val_size, args.test_size = 6, 1, 2, 2
        args.max_tokens, args.reflection_tokens = 8, 16
    load_start = os.getloadavg()[0]
    parts = []
    for env in args.env:
        with tempfile.TemporaryDirectory() as tmp:
            result, elapsed, max_tokens = optimize(env, args, Path(tmp))
        parts.append(env_report(env, result, elapsed, max_tokens))
    loads = f"{load_start:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"
    section = report(parts, args, loads)
    print(section)
    if args.write_docs:
        write_docs(section)


if __name__ == "__main__":
    main()
