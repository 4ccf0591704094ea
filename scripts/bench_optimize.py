"""Prompt optimisation benchmark: `prime eval optimize` with the local model, gain on held-out.

For each target, `prime eval optimize builtin_envs/ENV -m MODEL --reflection-model
local/smollm2-135m` (SmolLM2-135M-Instruct on CPU writes the prompts, sampled: the weakest
reflection model there is, so this is a floor, not what a strong reflection model gets). MODEL
answers greedily: the base model for `reverse-text` and `arithmetic` (it scores 0 on both, so
no prompt can show a gain), and for `arithmetic-trained` a policy trained with the env's recipe
(`prime train builtin_envs/arithmetic --max-steps N`, exported merged, `-m DIR`): a model that
scores above 0 and whose answers depend on the prompt. The baseline is measured in the same run
on the same held-out tasks: the environment's own system prompt. Printed per target: held-out
reward and `correct` before and after (mean ± SE), their difference, what the search kept and
dropped, rollouts spent, wall time, CPU-s; and the load.

`--mode append --proposals N` has the reflection model add one sentence to the parent's prompt,
N sampled proposals per minibatch (what a 135M reflection model can do: its whole prompts are
off-task and score 0); `--mode rewrite` asks for a whole new prompt (GEPA's meta-prompt).

Training is evaluated after every step, and without `--policy-step` the bench takes the first
policy whose held-out `correct` lies in 0.2-0.8 (a target above 0 and below its ceiling: one
that scores 0 everywhere leaves nothing to improve); async training is not bit-repeatable, so
the policy is chosen by its score. `--searches N` repeats the search with N seeds on it.

Usage: `python scripts/bench_optimize.py [--env arithmetic-trained] [--budget 48]
[--train-steps 4 [--policy-step K] | --policy-run RUN_DIR --policy-step N]
[--mode append --proposals 4] [--seed 0 --searches 2] [--quick] [--write-docs]`; with
`--write-docs` it replaces the `## Prompt optimisation` section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from testing.benchmarks import write_section

ROOT = Path(__file__).resolve().parents[1]
PRIME = Path(sys.executable).with_name("prime")
SECTION = "## Prompt optimisation"


@dataclass(frozen=True)
class Target:
    env: str  # builtin_envs/<env>
    env_args: dict[str, Any]
    max_tokens: int  # per answer: enough for a whole answer of this environment
    trained: bool = False  # -m: a policy trained with the env's recipe, not the base model


RECIPE_ARGS = {"difficulty": 1, "num_train_examples": 50, "num_eval_examples": 50}
TARGETS = {
    "reverse-text": Target("reverse-text", {"num_eval_examples": 40}, 96),
    "arithmetic": Target("arithmetic", {"difficulty": 1, "num_eval_examples": 40}, 48),
    # the recipe's tasks and answer length (builtin_envs/arithmetic/arithmetic/train/)
    "arithmetic-trained": Target("arithmetic", RECIPE_ARGS, 32, trained=True),
}


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def prime(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [str(PRIME), *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )


SENSITIVE = (0.2, 0.8)
"""Held-out `correct` of a policy whose answers can move with its prompt either way."""


def pick_policy(evals: dict[int, float]) -> int:
    """The first policy past step 0 whose trainer eval is inside SENSITIVE, else the one
    nearest its middle: the search needs a target that scores above 0 (nothing to improve on
    otherwise) and below its ceiling. Training is not bit-repeatable in async mode, so the
    policy is chosen by its score, not by its step."""
    trained = {step: value for step, value in evals.items() if step > 0}
    inside = [step for step in sorted(trained) if SENSITIVE[0] <= trained[step] <= SENSITIVE[1]]
    middle = sum(SENSITIVE) / 2
    return inside[0] if inside else min(trained, key=lambda step: abs(trained[step] - middle))


def trained_policy(args: argparse.Namespace, work: Path) -> tuple[Path, str]:
    """A merged model directory of a policy trained with arithmetic's recipe (`--train-steps`
    steps here, an eval after each, or `--policy-run`'s), and a line saying where it comes
    from. Without `--policy-step` the policy is `pick_policy`'s."""
    run = args.policy_run
    cost = ""
    if run is None:
        cpu, started = children_cpu_s(), time.monotonic()
        proc = prime(
            "train", str(ROOT / "builtin_envs" / "arithmetic"),
            "--max-steps", str(args.train_steps), "--trainer.scheduler.type", "constant",
            "--seed", str(args.seed), "--orchestrator.eval.interval", "1",
            "--monitors.live", "false", "-o", str(work / "outputs"), "--run-name", "policy",
            cwd=work,
        )  # fmt: skip
        if proc.returncode != 0:
            sys.exit(f"prime train failed:\n{proc.stderr[-3000:]}")
        [run] = (work / "outputs" / "train").glob("*/policy*")
        cost = (
            f", {children_cpu_s() - cpu:.0f} CPU-s and {time.monotonic() - started:.0f} s wall "
            "to train"
        )
    evals = {
        int(row["policy"]): float(row["eval/correct"])
        for row in map(json.loads, (run / "evals.jsonl").read_text().splitlines())
        if row.get("eval/correct") is not None
    }
    step = args.policy_step if args.policy_step is not None else pick_policy(evals)
    out = work / "policy"
    proc = prime(
        "train", "export", str(run), "--step", str(step), "--merge", "-o", str(out), cwd=work
    )
    if proc.returncode != 0:
        sys.exit(f"prime train export failed:\n{proc.stderr[-3000:]}")
    seen = ", ".join(f"{v:.2f} at step {k}" for k, v in sorted(evals.items()))
    chosen = (
        "" if args.policy_step is not None
        else f"; chosen as the first with held-out `correct` in {SENSITIVE[0]}-{SENSITIVE[1]}, "
        "else the nearest"
    )  # fmt: skip
    origin = (
        f"policy {step} of `prime train builtin_envs/arithmetic --max-steps {args.train_steps} "
        f"--trainer.scheduler.type constant --seed {args.seed} --orchestrator.eval.interval 1` "
        f"(the recipe, constant lr{cost}; its trainer's greedy held-out `correct` on the 50 eval "
        f"problems: {seen}{chosen})"
        if args.policy_run is None
        else f"policy {step} of the run {run.name} (trainer's held-out `correct`: {seen})"
    )
    return out, origin


def optimize(
    name: str, model: str, args: argparse.Namespace, out: Path, seed: int
) -> tuple[dict[str, Any], float, float, int]:
    target = TARGETS[name]
    max_tokens = args.max_tokens or target.max_tokens
    cpu, started = children_cpu_s(), time.monotonic()
    proc = prime(
        "eval", "optimize", str(ROOT / "builtin_envs" / target.env),
        "-a", json.dumps(target.env_args),
        "-m", model, "--reflection-model", "local/smollm2-135m",
        "--budget", str(args.budget), "--minibatch", str(args.minibatch),
        "--val-size", str(args.val_size), "--test-size", str(args.test_size),
        "-t", str(max_tokens), "-T", "0", "--reflection-max-tokens", str(args.reflection_tokens),
        "--reflection-temperature", str(args.reflection_temperature),
        "--mode", args.mode, "--proposals", str(args.proposals),
        "--seed", str(seed), "-o", str(out), "--output", "json", cwd=out,
    )  # fmt: skip
    elapsed, cpu_s = time.monotonic() - started, children_cpu_s() - cpu
    if proc.returncode != 0:
        sys.exit(f"prime eval optimize {name} failed:\n{proc.stderr[-3000:]}")
    print(proc.stderr, file=sys.stderr)
    result = json.loads(proc.stdout)
    for line in (Path(result["directory"]) / "candidates.jsonl").open():  # what was proposed
        candidate = json.loads(line)
        print(f"kept={candidate['kept']}: {candidate['prompt']!r}", file=sys.stderr)
    return result, elapsed, cpu_s, max_tokens


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def correct(summary: dict[str, Any]) -> str:
    value = summary["rewards"].get("correct")
    return "-" if value is None else f"{value:.3f}"


def env_report(
    name: str,
    result: dict[str, Any],
    elapsed: float,
    cpu_s: float,
    max_tokens: int,
    model: str,
    seed: int,
) -> str:
    target = TARGETS[name]
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
    return f"""### {name}: prime/{target.env} (`-a '{json.dumps(target.env_args)}'`, {max_tokens} tokens an answer), search seed {seed}

Model: {model}. Splits: {splits["train"]} train, {splits["validation"]} validation, {splits["heldout"]} held-out tasks.

| prompt | held-out reward (mean ± se) | held-out `correct` | validation | errors |
|---|---|---|---|---|
| the environment's (baseline) | {fmt(b)} ± {fmt(before["reward_stderr"])} | {correct(before)} | {fmt(result["val_mean"]["seed"])} | {before["errors"]} |
| optimised (candidate {result["best_candidate"]}) | {fmt(a)} ± {fmt(after["reward_stderr"])} | {correct(after)} | {fmt(result["val_mean"]["best"])} | {after["errors"]} |

Gain on held-out: **{a - b:+.3f}** (ratio {ratio}); {result["candidates"] - 1} proposals kept, {result["rejected"]} dropped (no better than their parent on the minibatch), {result["rollouts_used"]} rollouts spent, {elapsed:.0f} s wall, {cpu_s:.0f} CPU-s. Best prompt: "{best}".{reading}
"""


def report(parts: list[str], args: argparse.Namespace, loads: str) -> str:
    policy = (
        f" --policy-run {args.policy_run} --policy-step {args.policy_step}"
        if args.policy_run
        else f" --train-steps {args.train_steps}"
        + (f" --policy-step {args.policy_step}" if args.policy_step is not None else "")
        if "arithmetic-trained" in args.env
        else ""
    )
    command = (
        "python scripts/bench_optimize.py "
        + " ".join(f"--env {env}" for env in args.env)
        + f" --budget {args.budget} --minibatch {args.minibatch} --val-size {args.val_size} "
        f"--test-size {args.test_size} --mode {args.mode} --proposals {args.proposals} "
        f"--reflection-temperature {args.reflection_temperature:g} "
        f"--reflection-tokens {args.reflection_tokens}"
        + (f" --max-tokens {args.max_tokens}" if args.max_tokens else "")
        + policy
        + f" --seed {args.seed} --searches {args.searches}"
        + (" --write-docs" if args.write_docs else "")
    )
    body = "\n".join(parts)
    return f"""{SECTION}

`{command}` on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC (CPython {sys.version.split()[0]}, 2 CPUs shared with other work; 1-minute load average {loads}). `prime eval optimize` on CPU, the model answering greedily, SmolLM2-135M-Instruct (`local/smollm2-135m`) reflecting ({args.mode} mode, {args.proposals} proposals a minibatch sampled at temperature {args.reflection_temperature:g}, {args.reflection_tokens} tokens): a floor, the weakest reflection model there is. Budget {args.budget} rollouts per target, minibatch {args.minibatch}. The baseline is the environment's own system prompt on the same held-out tasks in the same run. The CLI's own gain (0.000 -> 1.000 held-out) is tested with a scripted reflection model on a prompt-sensitive environment (`tests/e2e/test_eval_optimize.py`); this measures what the local model alone gets.

{body}"""


def write_docs(section: str) -> None:
    write_section(SECTION, section)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", action="append", choices=sorted(TARGETS))
    parser.add_argument("--budget", type=int, default=48)
    parser.add_argument("--minibatch", type=int, default=4)
    parser.add_argument("--val-size", type=int, default=8)
    parser.add_argument("--test-size", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, help="per answer (default: the env's)")
    parser.add_argument("--reflection-tokens", type=int, default=160)
    parser.add_argument("--reflection-temperature", type=float, default=1.0)
    parser.add_argument("--mode", choices=("rewrite", "append"), default="rewrite")
    parser.add_argument("--proposals", type=int, default=1, help="prompts per minibatch")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--searches", type=int, default=1,
        help="optimise each target this many times (search seeds SEED, SEED+1, ...)",
    )  # fmt: skip
    parser.add_argument(
        "--train-steps", type=int, default=4, help="arithmetic-trained: steps of the recipe"
    )
    parser.add_argument(
        "--policy-run", type=Path, help="arithmetic-trained: use this run's policy, no training"
    )
    parser.add_argument("--policy-step", type=int, help="with --policy-run: its policy version")
    parser.add_argument("--quick", action="store_true", help="a tiny run: the script works")
    parser.add_argument("--write-docs", action="store_true", help="update docs/benchmarks.md")
    args = parser.parse_args()
    args.env = args.env or ["reverse-text", "arithmetic"]
    if args.searches < 1:
        parser.error("--searches must be at least 1")
    if args.policy_run is not None and args.policy_step is None:
        parser.error("--policy-run needs --policy-step (the policy version to export)")
    if args.quick:
        if args.write_docs:
            parser.error("--quick measures nothing worth publishing; drop --write-docs")
        args.env = args.env[:1]
        args.budget, args.minibatch, args.val_size, args.test_size = 6, 1, 2, 2
        args.max_tokens, args.reflection_tokens, args.train_steps = 8, 16, 1
    load_start = os.getloadavg()[0]
    parts, gains = [], []
    for name in args.env:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            model, origin = "local/smollm2-135m", "SmolLM2-135M-Instruct (`local/smollm2-135m`)"
            if TARGETS[name].trained:
                policy, origin = trained_policy(args, work)
                model = str(policy)
            for seed in range(args.seed, args.seed + args.searches):
                out = work / f"search-{seed}"
                out.mkdir()
                result, elapsed, cpu_s, max_tokens = optimize(name, model, args, out, seed)
                parts.append(env_report(name, result, elapsed, cpu_s, max_tokens, origin, seed))
                held = result["heldout"]
                gain = held["after"]["reward_mean"] - held["before"]["reward_mean"]
                gains.append(f"{name} seed {seed}: {gain:+.3f}")
    parts.append("Gains on held-out, per search: " + "; ".join(gains) + ".")
    loads = f"{load_start:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"
    section = report(parts, args, loads)
    print(section)
    if args.write_docs:
        write_docs(section)


if __name__ == "__main__":
    main()
