"""Benchmarks for `prime train` (issue 10, acceptance 3 and 4). Prints ratios, load and CPU-s.

    python scripts/bench_train.py async   [--steps 6] [--quick]  # A=1 vs A=0, log-normal latency
    python scripts/bench_train.py learn   [--parallel] [--plot PNG]  # SmolLM2 on arithmetic (long)

`async`: the fast test env with scoring latency ~ LogNormal(median 1 s, σ 1) (a judge or tool
standing in) on a tiny random-init model of SmolLM2's shape, run once with max_async_level 1
and once with 0; steps/hour is measured between the first and the last step's metrics line
(model loading excluded), so the ratio is the pipelining alone. Target: ≥ 1.5×.

`learn`: SmolLM2-135M + LoRA on the `arithmetic` built-in at difficulty 1 (50 train / 50
held-out) with the shipped config (`configs/arithmetic_smollm2.toml`, or --config), once with
max_async_level 1 and once with 0 (one after the other, or at once with --parallel: CPU-s are
counted per run's process tree either way). Prints greedy held-out `correct` at every eval of
both, CPU-s, wall time, peak RSS, the load during the runs, and each bar: A=1's last two evals
>= step 0 + 0.5 (goal +0.6) within 2,400 CPU-s and 8 GB; A=1's eval >= A=0's - 0.05 at equal
steps.
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
import threading
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

    from local_model.models import gguf_path

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


def bench_async(steps: int, latency_median_s: float = 1.0) -> None:
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
            json.dumps(
                {"latency_median_s": latency_median_s, "latency_sigma": 1.0, "num_tasks": 64}
            ),
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
            f"latency median {latency_median_s:g} s, "
            f"load {load:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


LEARN_CONFIG = ROOT / "configs" / "arithmetic_smollm2.toml"
LEARN_ARGS = {"difficulty": 1, "num_train_examples": 50, "num_eval_examples": 50}


class Load:
    """The 1-minute load average sampled every 10 s while the runs go (mean and max)."""

    def __init__(self) -> None:
        self.samples = [os.getloadavg()[0]]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(10):
            self.samples.append(os.getloadavg()[0])

    def stop(self) -> str:
        self._stop.set()
        self.samples.append(os.getloadavg()[0])
        mean_load = sum(self.samples) / len(self.samples)
        return (
            f"load {self.samples[0]:.1f} at the start, mean {mean_load:.1f}, max "
            f"{max(self.samples):.1f}, {self.samples[-1]:.1f} at the end, on {os.cpu_count()} cores"
        )


def start_train(args: list[str], cwd: Path, log: Path) -> subprocess.Popen[str]:
    """`prime train …` in the background: its JSON answer to LOG.json, its stderr to LOG."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    command = [str(PRIME), "train", *args, "--output", "json", "--monitors.live", "false"]
    with log.with_suffix(".json").open("w") as answer, log.open("w") as err:
        return subprocess.Popen(command, cwd=cwd, env=env, text=True, stdout=answer, stderr=err)


def finish_train(process: subprocess.Popen[str], log: Path) -> tuple[Path, float, float]:
    """Wait for one run: its run dir, the CPU-seconds of it and every process under it (the
    trainer child included), and its largest process's peak RSS in MiB (wait4's rusage)."""
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        sys.exit(f"prime train failed (exit {process.returncode}):\n{log.read_text()[-3000:]}")
    run = Path(json.loads(log.with_suffix(".json").read_text())["run_dir"])
    return run, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def bench_learn(
    config: Path, steps: int | None, out: Path, parallel: bool, png: Path | None
) -> None:
    """Acceptance 3: the shipped config at A=1 and A=0 (one after the other, or at once with
    --parallel: CPU-seconds are counted per run either way)."""
    out.mkdir(parents=True, exist_ok=True)
    common = [str(ARITHMETIC), "-c", str(config), "-a", json.dumps(LEARN_ARGS), "-o", str(out)]
    if steps is not None:
        common += ["--max-steps", str(steps)]
    load = Load()
    started = time.monotonic()
    results: dict[int, tuple[Path, float, float, float]] = {}
    pending: dict[int, subprocess.Popen[str]] = {}
    for level in (1, 0):
        log = out / f"bench-learn-A{level}.log"
        pending[level] = start_train(
            [*common, "--orchestrator.max-async-level", str(level)], ROOT, log
        )
        if not parallel:
            results[level] = (*finish_train(pending.pop(level), log), time.monotonic() - started)
    for level, process in pending.items():
        results[level] = (
            *finish_train(process, out / f"bench-learn-A{level}.log"),
            time.monotonic() - started,
        )
    load_line = load.stop()

    curves: dict[int, dict[int, float]] = {}
    for level, (run, cpu, rss, wall) in results.items():
        evals = {int(e["policy"]): float(e["eval/correct"]) for e in rows(run, "evals.jsonl")}
        metrics = rows(run, "metrics.jsonl")
        trainer_rss = max((m.get("trainer/peak_rss_mb") or 0.0 for m in metrics), default=0.0)
        orch_rss = max((m.get("mem/orchestrator_peak_rss_mb") or 0.0 for m in metrics), default=0.0)
        curves[level] = evals
        curve = ", ".join(f"{s}: {c:.2f}" for s, c in sorted(evals.items()))
        print(
            f"A={level}: {len(metrics)} steps; held-out greedy correct by step {{{curve}}}\n"
            f"      {cpu:.0f} CPU-s (all run processes), {wall:.0f} s wall; peak RSS "
            f"{max(rss, trainer_rss, orch_rss) / 1024:.2f} GB in one process (orchestrator "
            f"{orch_rss / 1024:.2f} GB + trainer {trainer_rss / 1024:.2f} GB = "
            f"{(orch_rss + trainer_rss) / 1024:.2f} GB together); run {run}"
        )
    print(load_line)

    run, cpu, rss, _ = results[1]
    evals = curves[1]
    ordered = [evals[s] for s in sorted(evals)]
    base = evals.get(0, 0.0)
    last_two = ordered[-2:]
    gain = min(last_two) - base
    metrics = rows(run, "metrics.jsonl")
    peak = max(
        [rss / 1024]
        + [(m.get("trainer/peak_rss_mb") or 0.0) / 1024 for m in metrics]
        + [(m.get("mem/orchestrator_peak_rss_mb") or 0.0) / 1024 for m in metrics]
    )
    learned = len(ordered) >= 3 and gain >= 0.5
    print(
        f"learning (A=1): last two evals {', '.join(f'{c:.2f}' for c in last_two)} vs step 0 "
        f"{base:.2f}: +{gain:.2f} at the lower (bar >= +0.5: {'met' if learned else 'missed'}; "
        f"goal +0.6: {'met' if gain >= 0.6 else 'missed'})"
    )
    print(f"CPU-s (A=1): {cpu:.0f} (bar <= 2,400: {'met' if cpu <= 2400 else 'missed'})")
    print(f"peak RSS (A=1): {peak:.2f} GB (bar <= 8 GB: {'met' if peak <= 8 else 'missed'})")
    common_steps = sorted(set(curves[1]) & set(curves[0]) - {0})
    gaps = {s: curves[1][s] - curves[0][s] for s in common_steps}
    last = common_steps[-1] if common_steps else None
    ok = last is not None and gaps[last] >= -0.05
    print(
        "async - sync eval at equal steps: "
        + ", ".join(f"step {s}: {g:+.2f}" for s, g in gaps.items())
        + f" (bar at the last, >= -0.05: {'met' if ok else 'missed'}; at every eval: "
        f"{'met' if gaps and min(gaps.values()) >= -0.05 else 'missed'})"
    )
    if png is not None:
        subprocess.run([str(PRIME), "train", "plot", str(run), "-o", str(png)], check=True)
        print(f"curve (A=1): {png}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("which", choices=["async", "learn"])
    parser.add_argument("--steps", type=int)
    parser.add_argument("--out", type=Path, default=Path("outputs"))
    parser.add_argument(
        "--quick",
        action="store_true",
        help="async, 2 steps at 0.2 s median latency (CI smoke: every code path, no number)",
    )
    parser.add_argument("--config", type=Path, default=LEARN_CONFIG, help="learn: -c TOML")
    parser.add_argument("--parallel", action="store_true", help="learn: A=1 and A=0 at once")
    parser.add_argument("--plot", type=Path, help="learn: write the A=1 run's curve PNG here")
    args = parser.parse_args()
    if args.which == "async":
        if args.quick:  # the fewest steps steps_per_hour can measure, latency cut 5x
            bench_async(2, latency_median_s=0.2)
        else:
            bench_async(args.steps or 6)
    else:
        bench_learn(args.config, args.steps, args.out, args.parallel, args.plot)


if __name__ == "__main__":
    main()
