"""Benchmarks for `prime train` (issues 10 and 23). Prints ratios or bars, load and CPU-s.

    python scripts/bench_train.py async  [--steps 6] [--quick]  # A=1 vs A=0, log-normal latency
    python scripts/bench_train.py learn  [--plot PNG]           # the arithmetic recipe (long)
    python scripts/bench_train.py trl    [--seeds 0,1] [--sides ours,trl] [--stop-at 0.8] [--variant V]
    python scripts/bench_train.py ablate [--variants a,b] [--stop-at 0.8]

`async`: the fast test env with scoring latency ~ LogNormal(median 1 s, σ 1) (a judge or tool
standing in) on a tiny random-init model of SmolLM2's shape, run once with max_async_level 1
and once with 0; steps/hour is measured between the first and the last step's metrics line
(model loading excluded), so the ratio is the pipelining alone. Target: ≥ 1.5×.

`learn`: `prime train` on the `arithmetic` built-in with its recipe and no flags
(`arithmetic/train/smollm2-135m.toml`: SmolLM2-135M + LoRA, 50 train / 50 held-out
problems). Prints greedy held-out `correct` at every eval, CPU-s of the run's process tree,
peak RSS, the load meanwhile, and the bars: the last two evals >= step 0 + 0.5 within
2,400 CPU-s and 8 GB, <= 2% of training rollouts copying the prompt's example, cores busy.

`trl`: per seed, ours (as `learn`; `--sides torch,vllm,trl` through each engine instead) and
TRL 1.16's GRPOTrainer (scripts/bench_train_trl.py, in a virtualenv of the bench's own) on the
recipe's settings, one run at a time, interleaved (ours seed 0, TRL seed 0, TRL seed 1, ours
seed 1, …): CPU-s to held-out 0.5 and 0.8 for each, and ours' bars; scripts/bench_engines.py
`learn` is this with the engines. `ablate`: recipe variants, two at a time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PRIME = Path(sys.executable).with_name("prime")
VOWELS = ROOT / "tests" / "trainer_bridge" / "envs" / "vowels.py"
ARITHMETIC = ROOT / "builtin_envs" / "arithmetic"


def tiny_model(directory: Path) -> Path:
    """SmolLM2's architecture and tokenizer at toy size, random init (no downloads)."""
    from transformers import AutoTokenizer

    from local_model.models import gguf_path
    from local_model.tiny import save_tiny_smollm2

    path = gguf_path("smollm2-135m")
    AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name).save_pretrained(directory)
    return save_tiny_smollm2(directory)


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


RECIPE = ARITHMETIC / "arithmetic" / "train" / "smollm2-135m.toml"


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

    def now(self) -> str:
        return f"load {os.getloadavg()[0]:.1f}"

    def stop(self) -> str:
        self._stop.set()
        self.samples.append(os.getloadavg()[0])
        mean_load = sum(self.samples) / len(self.samples)
        return (
            f"load {self.samples[0]:.1f} at the start, mean {mean_load:.1f}, max "
            f"{max(self.samples):.1f}, {self.samples[-1]:.1f} at the end, on {os.cpu_count()} cores"
        )


@dataclass
class Run:
    """One finished training run (ours or TRL's): its held-out curve with the CPU-seconds
    of its whole process tree at each eval, its total CPU-s, wall time and peak RSS."""

    name: str
    evals: list[tuple[int, float, float]]  # (step, held-out correct, CPU-s at that eval)
    cpu_s: float
    wall_s: float
    peak_rss_gb: float
    directory: Path
    notes: str = ""
    walls: list[float] = field(default_factory=list)  # wall-s since the start, at each eval

    def cpu_to(self, bar: float) -> float | None:
        return next((cpu for _, correct, cpu in self.evals if correct >= bar), None)

    def wall_to(self, bar: float) -> float | None:
        return next((w for (_, c, _), w in zip(self.evals, self.walls) if c >= bar), None)

    def at_step(self, step: int) -> tuple[float, float, float | None] | None:
        """(held-out correct, CPU-s, wall-s) at the eval of `step`; None if there was none."""
        for i, (at, correct, cpu) in enumerate(self.evals):
            if at == step:
                return correct, cpu, self.walls[i] if i < len(self.walls) else None
        return None

    def curve(self) -> str:
        return ", ".join(f"{step}: {correct:.2f}" for step, correct, _ in self.evals)


def wait_run(process: subprocess.Popen[str], started: float) -> tuple[float, float]:
    """Wait for a child: (CPU-s of it and every process under it, peak RSS in GB) (wait4)."""
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024 / 1024


def start_ours(args: list[str], log: Path) -> subprocess.Popen[str]:
    """`prime train …` in the background, run dir named after LOG: its JSON answer to
    LOG.json, its stderr to LOG."""
    args = [*args, "--run-name", f"{log.stem}-{time.strftime('%Y%m%d-%H%M%S')}"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    command = [str(PRIME), "train", *args, "--output", "json", "--monitors.live", "false"]
    with log.with_suffix(".json").open("w") as answer, log.open("w") as err:
        return subprocess.Popen(
            command, cwd=ROOT, env=env, text=True, stdout=answer, stderr=err,
            start_new_session=True,  # a scheduler group of its own, as from its own shell
        )  # fmt: skip


def finish_ours(name: str, process: subprocess.Popen[str], log: Path, started: float) -> Run:
    """Wait for one of our runs; one the run itself stopped (e.g. steps in a row with no
    update: `prime train` exits 1 with the run's error) is kept, its error in `notes`, so an
    interleaved bench goes on; one that left no run dir ends the bench."""
    cpu, rss = wait_run(process, started)
    try:
        answer = json.loads(log.with_suffix(".json").read_text())
    except (OSError, json.JSONDecodeError):
        answer = {}
    if process.returncode not in (0, 143) and not answer.get("run_dir"):
        sys.exit(f"prime train failed (exit {process.returncode}):\n{log.read_text()[-3000:]}")
    wall = time.monotonic() - started
    run = read_run(name, Path(answer["run_dir"]), cpu, wall, rss, started_at=time.time() - wall)
    if process.returncode not in (0, 143):
        run.notes = f"stopped itself (exit {process.returncode}): {answer.get('error')}"
    return run


def read_run(
    name: str, run: Path, cpu: float, wall: float, rss_gb: float, started_at: float | None = None
) -> Run:
    """One of our finished runs from its directory: the held-out curve of `evals.jsonl` (with
    each eval's wall-s since `started_at`, the epoch second the run was started, if given), the
    peak RSS the larger of `rss_gb` and the trainer's own (`metrics.jsonl`)."""
    found = rows(run, "evals.jsonl")
    evals = [(int(e["policy"]), float(e["eval/correct"]), float(e["cpu_s"])) for e in found]
    walls = [float(e["time"]) - started_at for e in found] if started_at is not None else []
    metrics = rows(run, "metrics.jsonl")
    trainer_rss = max((m.get("trainer/peak_rss_mb") or 0.0 for m in metrics), default=0.0)
    return Run(name, evals, cpu, wall, max(rss_gb, trainer_rss / 1024), run, walls=walls)


def trl_venv(work: Path) -> Path:
    """TRL in a virtualenv of the bench's own (torch from the same CPU wheel, this checkout's
    SDK and arithmetic environment for the rewards and the eval): never this checkout's."""
    venv = work / "trl-venv"
    python = venv / "bin" / "python"
    if not (venv / ".ready").is_file():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(python), "-m", "pip", "install", "-q"]
        subprocess.run([*pip, "torch==2.13.0", "trl==1.16.0", "peft"], check=True)
        subprocess.run([*pip, str(ROOT / "sdk"), str(ARITHMETIC)], check=True)
        (venv / ".ready").write_text("")
    return python


def recipe_settings(seed: int, threads: int) -> dict[str, Any]:
    """The arithmetic recipe's settings as the TRL script reads them (one source: the recipe)."""
    from local_model.models import converted_dir, load_local_model
    from trainer_bridge.config_loader import build_config

    config = build_config([RECIPE], env_id="prime/arithmetic")
    load_local_model("smollm2-135m")  # converts the GGUF once: the same weights for both
    oc, tc = config.orchestrator, config.trainer
    assert config.model.lora is not None
    weights = {"correct": 1.0, "shortest_correct": 0.2, **oc.reward.weights}
    return {
        "model_dir": str(converted_dir("smollm2-135m")),
        "env_args": config.env.args,
        "rollouts_per_example": oc.rollouts_per_example,
        "batch_size": oc.batch_size,
        "max_tokens": oc.sampling.max_tokens,
        "temperature": oc.sampling.temperature,
        "lr": tc.optim.lr,
        "scheduler": tc.scheduler.type,
        "max_steps": config.max_steps,
        "eval_interval": oc.eval.interval,
        "reward_weights": weights,
        "lora_rank": config.model.lora.rank,
        "lora_alpha": config.model.lora.alpha,
        "target_modules": config.model.lora.target_modules,
        "seed": seed,
        "threads": threads,
    }


def start_trl(python: Path, settings: dict[str, Any], out: Path) -> subprocess.Popen[str]:
    out.mkdir(parents=True, exist_ok=True)
    (out / "settings.json").write_text(json.dumps(settings, indent=2))
    env = dict(os.environ, OMP_NUM_THREADS=str(settings["threads"]))
    env.pop("PYTHONPATH", None)
    script = ROOT / "scripts" / "bench_train_trl.py"
    with (out / "trl.log").open("w") as log:
        return subprocess.Popen(
            [str(python), str(script), str(out / "settings.json"), str(out)],
            cwd=out, env=env, text=True, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip


def finish_trl(
    name: str, process: subprocess.Popen[str], out: Path, started: float, stopped: bool = False
) -> Run:
    cpu, rss = wait_run(process, started)
    if process.returncode != 0 and not (stopped and process.returncode == -15):
        sys.exit(
            f"TRL failed (exit {process.returncode}):\n{(out / 'trl.log').read_text()[-3000:]}"
        )
    found = rows(out, "evals.jsonl")
    evals = [(int(e["step"]), float(e["correct"]), float(e["cpu_s"])) for e in found]
    wall = time.monotonic() - started
    started_at = time.time() - wall
    walls = [float(e["time"]) - started_at for e in found]
    return Run(name, evals, cpu, wall, rss, out, walls=walls)


def report(runs: list[Run], load: str) -> None:
    for run in runs:
        to5, to8, wall8 = run.cpu_to(0.5), run.cpu_to(0.8), run.wall_to(0.8)
        print(
            f"{run.name}: held-out correct by step {{{run.curve()}}}\n"
            f"      CPU-s to >= 0.5: {to5 if to5 is not None else 'never'}, to >= 0.8: "
            f"{to8 if to8 is not None else 'never'}"
            + (f" ({wall8:.0f} s wall)" if wall8 is not None else "")
            + f"; {run.cpu_s:.0f} CPU-s in all, "
            f"{run.wall_s:.0f} s wall, peak RSS {run.peak_rss_gb:.2f} GB; {run.directory}"
            + (f"\n      {run.notes}" if run.notes else "")
        )
    print(load)


def cores_busy(run: Path) -> str:
    """CPU-s per wall-s of the run's process tree over its steps (2.0 = both cores, all
    the time); the sampler's and trainer's waits, each a share of the step's wall."""
    metrics = [m for m in rows(run, "metrics.jsonl") if "trainer/loss" in m]
    if len(metrics) < 2:
        return "cores busy: fewer than 2 steps with an update"
    busy = [m["perf/cores_busy"] for m in metrics[1:]]
    walls = [m["time/step_s"] for m in metrics]
    trainer_wait = [m.get("trainer/wait_s", 0.0) / w for m, w in zip(metrics, walls)]
    sampler_wait = [m["time/wait_policy_s"] / w for m, w in zip(metrics, walls)]
    return (
        f"cores busy (CPU-s / wall-s, steps 1..): mean {statistics.mean(busy):.2f} of 2 "
        f"({statistics.mean(busy) / 2:.0%}); the trainer waited {statistics.mean(trainer_wait):.0%} "
        f"and the sampler {statistics.mean(sampler_wait):.0%} of a step's wall (mean), each "
        "taking the other's core meanwhile"
    )


def copied_example_share(run: Path) -> tuple[int, int]:
    """(training rollouts whose answer is the prompt's example and wrong, all of them)."""
    copied = total = 0
    for path in sorted((run / "rollouts").glob("step_*.jsonl")):
        for record in rows(run / "rollouts", path.name):
            if record.get("error") is None:
                total += 1
                copied += bool(record.get("metrics", {}).get("copied_example"))
    return copied, total


def bars(run: Run) -> None:
    """Acceptance 2's bars for one of our runs: the gain of the last two evals over step 0,
    CPU-s, peak RSS, the share of training rollouts copying the prompt's example, cores busy."""
    scores = [c for _, c, _ in run.evals]
    if not scores:
        print(f"{run.name}: no eval")
        return
    gain = min(scores[-2:]) - scores[0]
    print(
        f"{run.name}: last two evals {', '.join(f'{c:.2f}' for c in scores[-2:])} vs step 0 "
        f"{scores[0]:.2f}: +{gain:.2f} at the lower (bar >= +0.5: "
        f"{'met' if gain >= 0.5 else 'missed'}); {run.cpu_s:.0f} CPU-s (bar <= 2,400: "
        f"{'met' if run.cpu_s <= 2400 else 'missed'}); peak RSS {run.peak_rss_gb:.2f} GB "
        f"(bar <= 8: {'met' if run.peak_rss_gb <= 8 else 'missed'})"
    )
    copied, total = copied_example_share(run.directory)
    share = copied / max(total, 1)
    print(
        f"{run.name}: training rollouts answering the prompt's example (wrong): {copied} of "
        f"{total} ({share:.1%}; bar <= 2%: {'met' if share <= 0.02 else 'missed'})"
    )
    print(f"{run.name}: {cores_busy(run.directory)}")


def bench_learn(out: Path, extra: list[str], png: Path | None) -> None:
    """Acceptance 2: `prime train prime/arithmetic` as shipped (the env's recipe, no flags)."""
    out.mkdir(parents=True, exist_ok=True)
    load = Load()
    started = time.monotonic()
    log = out / "bench-learn.log"
    run = finish_ours(
        "recipe", start_ours([str(ARITHMETIC), "-o", str(out), *extra], log), log, started
    )
    report([run], load.stop())
    bars(run)
    if png is not None:
        subprocess.run(
            [str(PRIME), "train", "plot", str(run.directory), "-o", str(png)], check=True
        )
        print(f"curve: {png}")


def algorithm(bound: int, std_norm: bool, async_level: int) -> list[str]:
    """Flags for the three settings issue 23 ablated: the step's group bound, advantage ÷
    group std, the async level; each variant sets all three, so it means the same whatever
    the recipe's defaults. 16 steps with no update in a row before a stop: with 4 groups a
    step, 3 (the default) stopped a seed-1 run at step 5 (5 of its first 6 steps tied)."""
    return [
        "--orchestrator.max-groups-per-step", str(bound),
        "--orchestrator.advantage.std-norm", str(std_norm).lower(),
        "--orchestrator.max-async-level", str(async_level),
        "--orchestrator.max-empty-steps", "16",
    ]  # fmt: skip


ABLATIONS: dict[str, list[str]] = {
    "recipe": [],
    "bound4": algorithm(4, False, 1),
    "stdnorm": algorithm(16, True, 1),
    "bound4-stdnorm": algorithm(4, True, 1),
    "bound4-sync": algorithm(4, False, 0),
    "bound4-stdnorm-sync": algorithm(4, True, 0),
    "sync": algorithm(16, False, 0),
    "noshare": ["--trainer.share-prefix", "false"],
    "nolend": ["--trainer.idle-sampler-threads", "1", "--inference.idle-trainer-threads", "1"],
}
"""Variants of the arithmetic recipe, as flags over it (`ablate --variants a,b,…`)."""


def bench_ablate(out: Path, names: list[str], seed: int, stop_at: float | None) -> None:
    """Variants of the recipe two at a time: CPU-s to held-out 0.5 and 0.8 for each."""
    out.mkdir(parents=True, exist_ok=True)
    load = Load()
    runs: list[Run] = []
    for pair in [names[i : i + 2] for i in range(0, len(names), 2)]:
        started = time.monotonic()
        going = {}
        for name in pair:
            log = out / f"ablate-{name}-s{seed}.log"
            args = [str(ARITHMETIC), "-o", str(out), "--seed", str(seed), *ABLATIONS[name]]
            going[name] = (start_ours(args, log), log)
        if stop_at is not None:
            scored = {n: (p, partial(our_scores, log)) for n, (p, log) in going.items()}
            stop_when_reached(scored, stop_at)
        runs += [finish_ours(n, p, log, started) for n, (p, log) in going.items()]
    report(runs, load.stop())
    for run in runs:
        print(f"{run.name}: {cores_busy(run.directory)}")


def our_scores(log: Path) -> list[tuple[int, float]]:
    """(step, held-out `correct`) so far of the run `start_ours` named after LOG."""
    found = list(log.parent.glob(f"train/*/{log.stem}-*/evals.jsonl"))
    return [
        (int(e["policy"]), float(e.get("eval/correct", 0.0)))
        for f in found
        for e in rows(f.parent, f.name)
    ]


def trl_scores(out: Path) -> list[tuple[int, float]]:
    """(step, held-out `correct`) so far of the TRL run writing to OUT."""
    return [(int(e["step"]), float(e["correct"])) for e in rows(out, "evals.jsonl")]


Scores = Callable[[], list[tuple[int, float]]]


def stop_when_reached(
    going: Mapping[str, tuple[subprocess.Popen[str], Scores]],
    bar: float,
    through: int = 0,
    give_up: int | None = None,
) -> set[str]:
    """SIGTERM each run once an eval reaches `bar` and one has been taken at step `through`
    or later (its CPU-s to the bar, and its held-out at `through`, are then known), or once
    one has been taken at step `give_up` or later; returns the names of those stopped."""
    import signal

    live, stopped = dict(going), set()
    while live:
        time.sleep(20)
        for name, (process, scores) in list(live.items()):
            if not alive(process):
                del live[name]
                continue
            found = scores()
            last = max((step for step, _ in found), default=-1)
            reached = any(c >= bar for _, c in found) and last >= through
            if reached or (give_up is not None and last >= give_up):
                process.send_signal(signal.SIGTERM)
                stopped.add(name)
                del live[name]
    return stopped


def alive(process: subprocess.Popen[str]) -> bool:
    """Whether the child still runs, without reaping it (wait_run's wait4 reads its rusage)."""
    return os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None


OURS = ("ours", "torch", "vllm")
"""Our sides of `trl`: `prime train` as shipped (`--backend auto`), or through that engine."""


def bench_trl(
    out: Path,
    seeds: list[int],
    threads: int,
    sides: list[str],
    stop_at: float | None,
    variant: str = "recipe",
    through: int = 0,
    give_up: int | None = None,
) -> list[Run]:
    """Ours (the recipe, as `prime train prime/arithmetic` runs it, or one of ABLATIONS; on
    the engine a side of OURS names) and TRL's GRPOTrainer on the same settings, one run at a
    time, interleaved, the order reversed every other seed (ours seed 0, TRL seed 0, TRL seed
    1, ours seed 1, …): CPU-s to held-out correct >= 0.5 and 0.8. `stop_at` stops each run
    at that score once it has an eval at step `through` (stop_when_reached), or at its eval
    of step `give_up`."""
    out.mkdir(parents=True, exist_ok=True)
    python = trl_venv(out) if "trl" in sides else None
    bar = stop_at if stop_at is not None else 2.0  # 2.0: never reached, the run goes to its end
    load = Load()
    runs: list[Run] = []
    for i, seed in enumerate(seeds):
        for side in sides if i % 2 == 0 else sides[::-1]:
            started = time.monotonic()
            if side in OURS:
                log = out / f"{side}-{variant}-s{seed}.log"
                flags = ["-o", str(out), "--seed", str(seed), *ABLATIONS[variant]]
                if side != "ours":
                    flags += ["--backend", side]
                ours = start_ours([str(ARITHMETIC), *flags], log)
                scores = partial(our_scores, log)
                stop_when_reached({side: (ours, scores)}, bar, through, give_up)
                runs.append(finish_ours(f"{side} seed {seed}", ours, log, started))
            else:
                assert python is not None
                trl_out = out / f"trl-s{seed}"
                shutil.rmtree(trl_out, ignore_errors=True)
                trl = start_trl(python, recipe_settings(seed, threads), trl_out)
                scores = partial(trl_scores, trl_out)
                stopped = stop_when_reached({side: (trl, scores)}, bar, through, give_up)
                runs.append(finish_trl(f"TRL seed {seed}", trl, trl_out, started, bool(stopped)))
            print(f"{runs[-1].name} done {time.strftime('%H:%M:%S')}, {load.now()}", flush=True)
    report(runs, load.stop())
    for bar in (0.5, 0.8):
        line = []
        for seed in seeds:
            pair = {r.name.split()[0]: r for r in runs if r.name.endswith(f"seed {seed}")}
            for side in (s for s in OURS if s in pair and "TRL" in pair):
                a, b = pair[side].cpu_to(bar), pair["TRL"].cpu_to(bar)
                ratio = f"{a / b:.2f}x" if a is not None and b is not None else "n/a"
                line.append(f"seed {seed}: {side} {a} vs TRL {b} ({ratio})")
        if line:
            print(f"CPU-s to held-out >= {bar}: " + "; ".join(line))
    for run in runs:
        if run.name.split()[0] in OURS:
            bars(run)
    return runs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("which", choices=["async", "learn", "trl", "ablate"])
    parser.add_argument("--steps", type=int)
    parser.add_argument("--out", type=Path, default=Path("outputs/bench-train"))
    parser.add_argument(
        "--quick",
        action="store_true",
        help="async, 2 steps at 0.2 s median latency (CI smoke: every code path, no number)",
    )
    parser.add_argument("--plot", type=Path, help="learn: write the run's curve PNG here")
    parser.add_argument("--seeds", default="0,1", help="trl: seeds, one pair of runs each")
    parser.add_argument("--trl-threads", type=int, default=1, help="trl: TRL's torch threads")
    parser.add_argument("--variants", default=",".join(ABLATIONS), help="ablate: which, by name")
    parser.add_argument(
        "--variant", default="recipe", choices=ABLATIONS, help="trl: ours as this ablation"
    )
    parser.add_argument("--seed", type=int, default=0, help="ablate: the seed")
    parser.add_argument(
        "--sides", default="ours,trl", help="trl: which runs per seed (ours, torch, vllm, trl)"
    )
    parser.add_argument(
        "--stop-at", type=float, help="ablate, trl: stop a run at this held-out score"
    )
    args, extra = parser.parse_known_args()
    if args.which == "async":
        if args.quick:  # the fewest steps steps_per_hour can measure, latency cut 5x
            bench_async(2, latency_median_s=0.2)
        else:
            bench_async(args.steps or 6)
    elif args.which == "learn":
        bench_learn(args.out.resolve(), extra, args.plot)
    elif args.which == "trl":
        seeds = [int(s) for s in args.seeds.split(",")]
        sides = args.sides.split(",")
        if not set(sides) <= {*OURS, "trl"}:
            sys.exit(
                f"--sides takes {', '.join(OURS)} and trl, comma-separated; got {args.sides!r}"
            )
        bench_trl(args.out.resolve(), seeds, args.trl_threads, sides, args.stop_at, args.variant)
    else:
        bench_ablate(args.out.resolve(), args.variants.split(","), args.seed, args.stop_at)


if __name__ == "__main__":
    main()
