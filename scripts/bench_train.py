"""Benchmarks for `prime train` (issue 10, acceptance 3 and 4). Prints ratios, load and CPU-s.

    python scripts/bench_train.py async   [--steps 6] [--quick]  # A=1 vs A=0, log-normal latency
    python scripts/bench_train.py learn   [--steps 15]     # SmolLM2 on arithmetic (long)

`async`: the fast test env with scoring latency ~ LogNormal(median 1 s, σ 1) (a judge or tool
standing in) on a tiny random-init model of SmolLM2's shape, run once with max_async_level 1
and once with 0; steps/hour is measured between the first and the last step's metrics line
(model loading excluded), so the ratio is the pipelining alone. Target: ≥ 1.5×.

`learn`: SmolLM2-135M + LoRA on the `arithmetic` built-in at difficulty 1 (50 train / 50
held-out), the calibrated config of the issue, async (A=1) then sync (A=0), greedy held-out
`correct` at every eval; target: the last two evals ≥ step 0 + 0.5 within 2,400 CPU-s.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PRIME = Path(sys.executable).with_name("prime")
VOWELS = ROOT / "tests" / "trainer_bridge" / "envs" / "vowels.py"
ARITHMETIC = ROOT / "builtin_envs" / "arithmetic"


def tiny_model(directory: Path) -> Path:
    """SmolLM2's architecture and tokenizer at toy size, random init (no downloads)."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from prime_env.clients.local_models import gguf_path

    path = gguf_path("smollm2-135m")
    AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name).save_pretrained(directory)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=49152,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        tie_word_embeddings=True,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=2,
    )
    LlamaForCausalLM(config).save_pretrained(directory)
    return directory


def train(args: list[str], cwd: Path) -> tuple[Path, float]:
    """Run `prime train …`; return its run dir and the CPU-seconds of it and its children."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    result = subprocess.run(
        [str(PRIME), "train", *args, "--output", "json", "--monitors.live", "false"],
        cwd=cwd,
        env=env,
        text=True,
        capture_output=True,
        check=False,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        sys.exit(f"prime train failed:\n{result.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Path(json.loads(result.stdout)["run_dir"]), cpu


def rows(run: Path, name: str) -> list[dict[str, Any]]:
    path = run / name
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def steps_per_hour(run: Path) -> float:
    metrics = rows(run, "metrics.jsonl")
    span = metrics[-1]["time"] - metrics[0]["time"]
    return 3600 * (len(metrics) - 1) / span


def bench_async(steps: int) -> None:
    work = Path(tempfile.mkdtemp(prefix="bench-train-"))
    try:
        model = tiny_model(work / "tiny")
        common = [
            str(VOWELS),
            "-m",
            str(model),
            "--max-steps",
            str(steps),
            "-o",
            str(work / "out"),
            "-a",
            json.dumps({"latency_median_s": 1.0, "latency_sigma": 1.0, "num_tasks": 64}),
            "--orchestrator.batch-size",
            "16",
            "--orchestrator.rollouts-per-example",
            "4",
            "--orchestrator.sampling.max-tokens",
            "8",
            "--orchestrator.eval.at-start",
            "false",
            "--orchestrator.eval.at-end",
            "false",
        ]
        load = os.getloadavg()[0]
        results = {}
        for level in (1, 0):
            run, cpu = train([*common, "--orchestrator.max-async-level", str(level)], work)
            results[level] = (steps_per_hour(run), cpu)
            print(f"A={level}: {results[level][0]:.0f} steps/hour, {cpu:.0f} CPU-s")
        ratio = results[1][0] / results[0][0]
        print(
            f"async/sync steps/hour: {ratio:.2f}x (target >= 1.5x: "
            f"{'met' if ratio >= 1.5 else 'missed'}); {steps} steps each, batch 16 x 4, "
            f"load {load:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


def bench_learn(steps: int, out: Path) -> None:
    common = [
        str(ARITHMETIC),
        "--max-steps",
        str(steps),
        "-o",
        str(out),
        "-a",
        json.dumps({"difficulty": 1, "num_train_examples": 50, "num_eval_examples": 50}),
        "--orchestrator.batch-size",
        "64",
        "--orchestrator.rollouts-per-example",
        "8",
        "--orchestrator.sampling.max-tokens",
        "32",
        "--orchestrator.sampling.temperature",
        "0.7",
        "--orchestrator.reward.weights",
        "{format_reward = 0.2}",
        "--orchestrator.eval.interval",
        "5",
        "--trainer.optim.lr",
        "3e-4",
    ]
    for level in (1, 0):
        started = time.monotonic()
        run, cpu = train([*common, "--orchestrator.max-async-level", str(level)], out.parent)
        evals = {int(e["policy"]): e.get("eval/correct") for e in rows(run, "evals.jsonl")}
        print(f"A={level}: held-out correct by step {evals}; {cpu:.0f} CPU-s, "
              f"{time.monotonic() - started:.0f} s wall; run {run}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("which", choices=["async", "learn"])
    parser.add_argument("--steps", type=int)
    parser.add_argument("--out", type=Path, default=Path("outputs"))
    parser.add_argument("--quick", action="store_true", help="async with 3 steps (CI smoke)")
    args = parser.parse_args()
    if args.which == "async":
        bench_async(3 if args.quick else args.steps or 6)
    else:
        bench_learn(args.steps or 15, args.out)


if __name__ == "__main__":
    main()
