"""Distillation on arithmetic against GRPO (issue 24): `rft` and `opd` from a GRPO-trained teacher.

    python scripts/bench_distill.py [--teacher RUN_DIR] [--methods rft,opd] [--quick]

One script, three runs of `prime train` on the `arithmetic` built-in with its recipe
(`arithmetic/train/smollm2-135m.toml`): the teacher (GRPO, the recipe as shipped; or an earlier
run of it, `--teacher RUN_DIR`), exported as a PEFT adapter (`prime train export`), then one
student per method (`--algo rft|opd --teacher ADAPTER`) from the base model, each stopped once
a held-out eval reaches `--share` (0.9) x the teacher's final held-out `correct`, or at the
recipe's step cap. Prints per run the held-out curve, the CPU-s of its whole process tree (at
the eval that reached the bar, and in all) and the ratio to GRPO's CPU-s to the same bar, read
from the teacher run's own evals. `--quick`: a tiny random-init model and a step each (every
code path, no number).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts.bench_train import (
    ARITHMETIC,
    PRIME,
    Load,
    Run,
    finish_ours,
    our_scores,
    read_run,
    rows,
    start_ours,
    stop_when_reached,
    tiny_model,
)

QUICK_ARGS = [
    "--max-steps",
    "1",
    "-a",
    json.dumps({"difficulty": 1, "num_train_examples": 8, "num_eval_examples": 4}),
    "--orchestrator.batch-size",
    "4",
    "--orchestrator.rollouts-per-example",
    "2",
    "--orchestrator.sampling.max-tokens",
    "8",
]
"""--quick's overrides of the recipe (with `-m TINY`): one step of 2 tasks x 2 rollouts."""


def teacher_run(out: Path, extra: list[str]) -> Run:
    """The arithmetic recipe with GRPO, as `prime train prime/arithmetic` runs it."""
    started = time.monotonic()
    log = out / "teacher-grpo.log"
    return finish_ours("grpo (teacher)", start_ours([str(ARITHMETIC), "-o", str(out), *extra], log), log, started)  # fmt: skip


def earlier_run(directory: Path) -> Run:
    """A finished run of the recipe: its curve and CPU-s from its own files."""
    if not (directory / "evals.jsonl").is_file():
        sys.exit(f"--teacher {directory}: not a training run directory (no evals.jsonl)")
    metrics = rows(directory, "metrics.jsonl")
    cpu = max((float(m.get("perf/cpu_s_total") or 0.0) for m in metrics), default=0.0)
    run = read_run("grpo (teacher)", directory, cpu, float("nan"), 0.0)
    run.cpu_s = max([cpu, *(c for _, _, c in run.evals)])
    return run


def export_adapter(run: Run, out: Path) -> tuple[Path, int, float]:
    """The teacher's last evaluated policy as a PEFT adapter, exported once per teacher run:
    (directory, step, its held-out `correct`)."""
    step, correct, _ = max(run.evals)
    adapter = out / f"teacher-adapter-{run.directory.name}-step{step}"
    if not adapter.is_dir():  # exported to a directory of its own, then renamed: whole or absent
        fresh = out / f"{adapter.name}.{os.getpid()}"
        command = [str(PRIME), "train", "export", str(run.directory), "--step", str(step), "-o", str(fresh)]  # fmt: skip
        result = subprocess.run(command, text=True, capture_output=True, check=False)
        if result.returncode != 0:
            sys.exit(f"prime train export failed:\n{result.stderr[-3000:]}")
        try:
            fresh.rename(adapter)
        except OSError:  # another bench of the same teacher exported it meanwhile
            shutil.rmtree(fresh)
    return adapter, step, correct


def student(
    method: str, adapter: Path, bar: float, out: Path, extra: list[str], wall_limit: float | None
) -> Run:
    """`prime train ARITHMETIC --algo METHOD --teacher ADAPTER`, stopped at the bar (or,
    with `wall_limit`, SIGTERMed that many seconds in: it stops as a Ctrl-C would)."""
    started = time.monotonic()
    log = out / f"student-{method}.log"
    args = [str(ARITHMETIC), "-o", str(out), "--algo", method, "--teacher", str(adapter), *extra]
    process = start_ours(args, log)
    timer = None
    if wall_limit is not None:
        timer = threading.Timer(wall_limit, process.terminate)  # a no-op once it has exited
        timer.start()
    stop_when_reached({method: (process, partial(our_scores, log))}, bar)
    if timer is not None:
        timer.cancel()
    return finish_ours(method, process, log, started)


def table(teacher: Run, students: list[Run], bar: float, step: int, correct: float) -> None:
    grpo = teacher.cpu_to(bar)
    print(
        f"teacher: grpo policy {step}, held-out correct {correct:.2f}; bar = {bar:.3f} "
        f"(the students' stop); GRPO's CPU-s to the bar: {grpo if grpo is not None else 'never'}"
    )
    print("| method | held-out correct by step | CPU-s to the bar | ratio vs GRPO | CPU-s in all | peak RSS GB |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for run in [teacher, *students]:
        to = run.cpu_to(bar)
        ratio = f"{to / grpo:.2f}x" if to is not None and grpo else "n/a"
        reached = f"{to:.0f}" if to is not None else "never"
        print(
            f"| {run.name} | {run.curve()} | {reached} | {ratio} | {run.cpu_s:.0f} | "
            f"{run.peak_rss_gb:.2f} |"
        )
    for run in students:
        met = max((c for _, c, _ in run.evals), default=0.0) >= bar
        print(f"{run.name}: >= {bar:.3f} held-out: {'met' if met else 'missed'}; {run.directory}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--teacher", type=Path, help="an earlier run of the recipe (its dir)")
    parser.add_argument("--methods", default="rft,opd")
    parser.add_argument("--share", type=float, default=0.9, help="of the teacher's accuracy")
    parser.add_argument("--out", type=Path, default=Path("outputs/bench-distill"))
    parser.add_argument("--quick", action="store_true", help="tiny model, a step each")
    parser.add_argument("--wall-limit", type=float, help="stop each student after this many s")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-distill-")) if args.quick else None
    out = (work / "out" if work else args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    extra = ["-m", str(tiny_model(work / "tiny")), *QUICK_ARGS] if work else []
    try:
        load = Load()
        teacher = earlier_run(args.teacher.resolve()) if args.teacher else teacher_run(out, extra)
        adapter, step, correct = export_adapter(teacher, out)
        bar = args.share * correct
        students = [
            student(m, adapter, bar, out, extra, args.wall_limit) for m in args.methods.split(",")
        ]
        table(teacher, students, bar, step, correct)
        print(load.stop())
    finally:
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
