"""Live progress of the step being sampled: groups done, rollouts/s and tokens/s.

A step can sample for minutes (a slow env, a policy that rarely scores), so the step lines of
metrics.py are not enough. On a terminal one transient line is redrawn; otherwise (a log, a
pipe) a plain line is printed at most every `PLAIN_EVERY_S`. The same numbers go to the run
dir's `progress.json` (replaced atomically) for scripts and tests.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.text import Text

from registry_index.files import write_json_atomic
from trainer_bridge.orchestrator.groups import Group
from trainer_bridge.protocol.run_dir import RunDir

PLAIN_EVERY_S = 30.0
FILE_EVERY_S = 1.0


@dataclass
class StepProgress:
    step: int = 0
    stage: str = ""
    groups_done: int = 0
    groups_zero_advantage: int = 0
    groups_reused: int = 0
    usable_rollouts: int = 0
    batch_size: int = 0
    rollouts: int = 0
    tokens: int = 0
    started: float = field(default_factory=time.monotonic)
    waiting: str = ""
    sampled_all: bool = False
    """Every step's batch is written: what is left is the trainer's last steps and the evals."""

    def rates(self) -> tuple[float, float]:
        elapsed = max(time.monotonic() - self.started, 1e-9)
        return self.rollouts / elapsed, self.tokens / elapsed

    def line(self, width: int | None = None) -> str:
        """The progress as one line; within `width` (a terminal's) the short form."""
        if self.sampled_all:
            left = self.waiting or "the trainer's last step and the final eval"
            return f"all {self.step} steps sampled; waiting for {left.removeprefix('waiting for ')}"
        per_s, tok_s = self.rates()
        text = (
            f"step {self.step} ({self.stage}): {self.groups_done} groups "
            f"({self.groups_zero_advantage} zero-advantage), {self.usable_rollouts}/"
            f"{self.batch_size} rollouts for the batch, {per_s:.2f} rollouts/s, {tok_s:.1f} tok/s"
        ) + (f"; {self.waiting}" if self.waiting else "")
        if width is None or len(text) <= width:
            return text
        short = (
            f"step {self.step}: {self.groups_done} groups ({self.groups_zero_advantage} zero-adv), "
            f"{self.usable_rollouts}/{self.batch_size} rollouts"
        )  # while it waits, the rates say nothing: what it waits for takes their place
        return short + (
            f"; {self.waiting}" if self.waiting else f", {per_s:.2f}/s, {tok_s:.0f} tok/s"
        )


class Progress:
    def __init__(self, run: RunDir, console: Console | None) -> None:
        self.run = run
        self.console = console
        self.current = StepProgress()
        self._live: Live | None = None
        self._printed = time.monotonic()
        self._written = 0.0
        if console is not None and console.is_terminal:
            self._live = Live(Text(""), console=console, transient=True, auto_refresh=False)
            self._live.start()

    def start_step(self, step: int, stage: str, batch_size: int) -> None:
        self.current = StepProgress(step=step, stage=stage, batch_size=batch_size)
        self._show(force=True)

    def sampled_all(self, steps: int) -> None:
        """No step is sampled any more (never a line of a step N+1 with 0 groups)."""
        self.current = StepProgress(step=steps, sampled_all=True)
        self._show(force=True)

    def group_done(self, group: Group, usable_rollouts: int) -> None:
        cur = self.current
        cur.groups_done += 1
        cur.groups_zero_advantage += group.dropped == "zero_variance"
        cur.groups_reused += group.reused
        cur.usable_rollouts = usable_rollouts
        if not group.reused:
            cur.rollouts += len(group.records)
            cur.tokens += sum(r.usage.completion_tokens for r in group.records)
        self._show()

    def waiting(self, what: str) -> None:
        """What the sampler waits for ("" while it samples): the trainer reads it to take
        the idle core (trainer.idle_sampler_threads), so it is written at once."""
        if what != self.current.waiting:
            self.current.waiting = what
            self._show(force=True)

    def _show(self, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._written >= FILE_EVERY_S:
            self._written = now
            per_s, tok_s = self.current.rates()
            data: dict[str, Any] = asdict(self.current)
            data.pop("started")
            data.update(rollouts_per_s=round(per_s, 3), tokens_per_s=round(tok_s, 2))
            write_json_atomic(self.run.progress, data)
        if self._live is not None:  # one line, never folded: cut at the terminal's edge
            width = self._live.console.width - 1
            line = Text(self.current.line(width), no_wrap=True, overflow="ellipsis")
            self._live.update(line, refresh=True)
        elif self.console is not None and now - self._printed >= PLAIN_EVERY_S:
            self._printed = now
            self.console.print(self.current.line(), highlight=False)

    def close(self) -> None:
        """Write the last state (a group's update may have fallen inside FILE_EVERY_S) and
        take the live line down."""
        self._show(force=True)
        if self._live is not None:
            self._live.stop()
            self._live = None
