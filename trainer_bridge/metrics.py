"""Per-step metrics: `metrics.jsonl`, the live view, optional wandb/tensorboard, and the plot.

One line per trained step, written once the trainer has finished that step, so it carries both
halves: the orchestrator's (rewards by component, drops and errors by kind, off-policy
distance, tokens/s, time split) and the trainer's (loss, lr, grad norm, entropy, mismatch KL,
clip fraction, peak memory), plus `eval/…` when the step was evaluated.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rich.console import Console

from registry_index.files import read_jsonl
from trainer_bridge.config import MonitorsConfig
from trainer_bridge.protocol.run_dir import RunDir

PLOT_PANELS: list[tuple[str, list[str]]] = [
    ("train reward", ["reward/mean"]),
    ("eval", ["eval/reward", "eval/correct"]),
    ("reward hacking", ["hacking/rewarded_incorrect", "hacking/top_completion_share"]),
    ("loss", ["trainer/loss"]),
    ("mismatch KL (k3)", ["trainer/mismatch_kl"]),
    ("zero-advantage groups", ["batch/zero_advantage_share"]),
    ("entropy", ["trainer/entropy"]),
    ("grad norm", ["trainer/grad_norm"]),
    ("learning rate", ["trainer/lr"]),
]


def mean(values: Iterable[float]) -> float | None:
    items = [v for v in values if v is not None and not math.isnan(v)]
    return sum(items) / len(items) if items else None


class Monitor:
    """Writes each step's metrics everywhere they are wanted."""

    def __init__(self, run: RunDir, monitors: MonitorsConfig, console: Console | None) -> None:
        self.run = run
        self.console = console if monitors.live else None
        self._wandb: Any = None
        self._tb: Any = None
        if monitors.wandb is not None:
            try:
                import wandb

                self._wandb = wandb.init(
                    project=monitors.wandb.project,
                    name=monitors.wandb.name or run.run_id,
                    dir=str(run.logs),
                    resume="allow",
                    id=run.run_id,
                )
            except ImportError:
                self._note("monitors.wandb is set but wandb is not installed; skipping it")
        if monitors.tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self._tb = SummaryWriter(str(run.logs / "tensorboard"))
            except ImportError:
                self._note("monitors.tensorboard is set but tensorboard is not installed; skipping")

    def _note(self, text: str) -> None:
        if self.console is not None:
            self.console.print(f"[yellow]{text}[/yellow]")

    def log(self, row: dict[str, Any]) -> None:
        with self.run.metrics.open("a") as fh:
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        step = int(row["step"])
        numeric = {k: v for k, v in row.items() if isinstance(v, (int, float)) and k != "step"}
        if self._wandb is not None:
            self._wandb.log(numeric, step=step)
        if self._tb is not None:
            for key, value in numeric.items():
                self._tb.add_scalar(key, value, step)
        if self.console is not None:
            self.console.print(step_line(row), highlight=False)

    def close(self) -> None:
        if self._wandb is not None:
            self._wandb.finish()
        if self._tb is not None:
            self._tb.close()


def _fmt(value: Any) -> str:
    if value is None:  # e.g. the reward of an SFT step: it trains on given traces, unscored
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


LIVE_KEYS = [
    ("reward", "reward/mean"),
    ("eval", "eval/reward"),
    ("paid-wrong", "hacking/rewarded_incorrect"),
    ("zero-adv", "batch/zero_advantage_share"),
    ("loss", "trainer/loss"),
    ("kl", "trainer/mismatch_kl"),
    ("off-pol", "off_policy/mean"),
    ("samples", "batch/samples"),
    ("errors", "errors/total"),
    ("dropped", "drops/total"),
    ("tok/s", "perf/tokens_per_s"),
    ("s", "time/step_s"),
]


def step_line(row: dict[str, Any]) -> str:
    """One aligned line per step for the live view (a header above step lines 0, 20, 40, …)."""
    cells = [f"{row['step']:>5}"] + [f"{_fmt(row.get(key, '')):>10}" for _, key in LIVE_KEYS]
    line = " ".join(cells)
    if row["step"] % 20 == 0:
        header = " ".join([f"{'step':>5}"] + [f"{title:>10}" for title, _ in LIVE_KEYS])
        return header + "\n" + line
    return line


def stage_starts(rows: list[dict[str, Any]]) -> list[tuple[int, str]]:
    """(first step, name) of each stage of a run with more than one."""
    starts: list[tuple[int, str]] = []
    last = None
    for row in sorted(rows, key=lambda r: r["step"]):
        stage = row.get("stage")
        if stage is not None and stage != last:
            starts.append((int(row["step"]), str(row.get("stage/name", stage))))
            last = stage
    return starts if len(starts) > 1 else []


def plot(metrics_path: Path, out: Path, evals: list[dict[str, Any]] | None = None) -> Path:
    """Draw the training curves of a metrics.jsonl into a PNG (matplotlib, no display needed),
    with a dashed line where each stage starts.

    `evals` (evals.jsonl rows, keyed by `policy`) are drawn at their policy version, so the
    step-0 eval of the base model appears too."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_jsonl(metrics_path)
    if not rows:
        raise ValueError(f"{metrics_path} has no metrics yet")
    starts = stage_starts(rows)
    fig, axes = plt.subplots(3, 3, figsize=(14, 10))
    for ax, (title, keys) in zip(axes.flat, PLOT_PANELS):
        for step, name in starts:
            ax.axvline(step - 0.5, color="grey", linestyle="--", linewidth=0.8)
            ax.text(step - 0.4, 1.0, name, transform=ax.get_xaxis_transform(), fontsize=7,
                    va="top", color="grey")  # fmt: skip
        drawn = False
        for key in keys:
            if key.startswith("eval/") and evals is not None:
                points = [(e["policy"], e[key]) for e in evals if isinstance(e.get(key), float)]
            else:
                points = [(r["step"], r[key]) for r in rows if isinstance(r.get(key), (int, float))]
            if points:
                xs, ys = zip(*points)
                ax.plot(xs, ys, marker="o" if len(points) < 30 else None, label=key)
                drawn = True
        ax.set_title(title)
        ax.set_xlabel("step")
        if drawn:
            ax.legend(fontsize=7)
        else:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
