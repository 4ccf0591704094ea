"""The live display of `prime eval run`: progress, running mean reward, errors and tokens/s per
model (stderr), and the loop that runs every model's run with it.

Kept apart from the commands so eval sets (`sets.py`) drive the same display.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, ProgressColumn, Task
from rich.table import Column
from rich.text import Text

from prime_env.clients.base import ModelClient
from prime_env.evaluation import EvalRun, execute
from prime_env.parallel import ClientFactory
from prime_env.record import RolloutRecord
from prime_env.summary import Summary

PLAIN_EVERY_S = 15.0
"""Off a terminal (a log, a pipe, CI), a progress line per model this often: never silent."""
FULL_LINE_WIDTH = 120
"""From this many columns on, the live line has a bar (of BAR_WIDTH) before its numbers."""
BAR_WIDTH = 30

LIVE_RATE_WINDOW_S = 5.0
"""A local model's tokens/s on the live display is measured over this many recent seconds."""


@dataclass
class Tracker:
    """Running numbers for one model's live display line."""

    total: int
    done: int = 0
    reward_sum: float = 0.0
    scored: int = 0
    errors: int = 0
    tokens: int = 0
    resumed: int = 0  # rollouts already done when this invocation started
    started: float = field(default_factory=time.perf_counter)
    live: Callable[[], int] | None = None  # tokens sampled so far (a local model in-process)
    live_base: int = 0
    window: deque[tuple[float, int]] = field(default_factory=deque)

    def tokens_per_s(self) -> float:
        """Completion tokens per second. For a local model, counted as it samples and over the
        last few seconds (its current speed, not diluted by the model's loading time)."""
        now = time.perf_counter()
        if self.live is None:
            return self.tokens / max(now - self.started, 1e-6)
        made = self.live() - self.live_base
        self.window.append((now, made))
        while len(self.window) > 2 and now - self.window[1][0] >= LIVE_RATE_WINDOW_S:
            self.window.popleft()
        then, before = self.window[0]
        return (made - before) / (now - then) if now - then > 0.2 else 0.0

    def add(self, record: RolloutRecord) -> None:
        self.done += 1
        self.tokens += record.usage.completion_tokens
        if record.error is not None:
            self.errors += 1
        elif record.reward is not None:
            self.scored += 1
            self.reward_sum += record.reward

    def fields(self) -> dict[str, Any]:
        mean = f"{self.reward_sum / self.scored:.3f}" if self.scored else "-"
        elapsed = max(time.perf_counter() - self.started, 1e-6)
        return {
            "reward": mean,
            "errors": str(self.errors),
            "rate": f"{(self.done - self.resumed) / elapsed:.2f}",
        }


@dataclass(frozen=True)
class Outcome:
    summary: Summary
    new_rollouts: int
    elapsed_s: float  # wall time of this invocation's rollouts (start-up excluded)


async def run_all(
    runs: list[tuple[EvalRun, ModelClient, ClientFactory]],
    concurrency: int,
    workers: int,
    progress: Progress,
    label: Callable[[EvalRun], str] = lambda run: run.spec.name,
) -> list[Outcome]:
    """Run every run at once, each with its line on `progress` (named by `label`)."""

    async def one(run: EvalRun, client: ModelClient, factory: ClientFactory) -> Outcome:
        tracker = Tracker(total=run.total)
        for rec in run.done:
            tracker.add(rec)
        tracker.resumed, tracker.tokens = tracker.done, 0
        if run.spec.client == "local" and workers == 1:
            from local_model.decode import sampled_tokens

            tracker.live, tracker.live_base = sampled_tokens, sampled_tokens()
        task = progress.add_task(
            label(run),
            total=run.total,
            completed=tracker.done,
            tracker=tracker,
            **tracker.fields(),
        )

        def on_record(record: RolloutRecord) -> None:
            tracker.add(record)
            progress.update(task, advance=1, **tracker.fields())

        before, start = tracker.done, time.perf_counter()
        try:
            summary = await execute(
                run,
                client,
                concurrency=concurrency,
                on_record=on_record,
                workers=workers,
                client_factory=factory,
            )
        finally:
            await client.aclose()
        return Outcome(summary, tracker.done - before, time.perf_counter() - start)

    # SIGTERM (a scheduler, `kill`) stops the runs as Ctrl-C does: cancelled, each writes
    # `interrupted` to its metadata.json and stays resumable (the default action writes nothing).
    loop, main = asyncio.get_running_loop(), asyncio.current_task()
    assert main is not None
    loop.add_signal_handler(signal.SIGTERM, main.cancel)
    plain = None
    if not progress.disable and not progress.console.is_terminal:
        plain = asyncio.create_task(plain_progress(progress, PLAIN_EVERY_S))
    try:
        return list(await asyncio.gather(*(one(*run) for run in runs)))
    finally:
        if plain is not None:
            plain.cancel()
        loop.remove_signal_handler(signal.SIGTERM)


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "-:--:--"
    whole = int(seconds)
    return f"{whole // 3600}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


def fit_line(parts: list[tuple[str, str]], name: str, width: int) -> str:
    """One model's line within `width` columns: the full labels when they fit, else the short
    ones, then the least needed fields dropped from the end, then the model name cut."""
    for labels in (0, 1):
        for keep in range(len(parts), 2, -1):
            body = " ".join(part[labels] for part in parts[:keep])
            if len(name) + 1 + len(body) <= width:
                return f"{name} {body}"
    body = " ".join(part[1] for part in parts[:3])
    room = max(width - len(body) - 2, 4)
    return f"{name[: room - 1]}… {body}" if len(name) > room else f"{name} {body}"


class LineColumn(ProgressColumn):
    """A model's progress as one line fitted to the terminal (fit_line): it never folds."""

    def __init__(self, width: int) -> None:
        super().__init__(table_column=Column(no_wrap=True, overflow="crop"))
        self.width = width

    def render(self, task: Task) -> Text:
        tracker = task.fields.get("tracker")
        rate = tracker.tokens_per_s() if isinstance(tracker, Tracker) else 0.0
        fields = task.fields
        parts = [
            (f"{int(task.completed)}/{int(task.total or 0)}",) * 2,
            (f"reward {fields['reward']}", f"r {fields['reward']}"),
            (f"errors {fields['errors']}", f"err {fields['errors']}"),
            (f"{fields['rate']} rollouts/s", f"{fields['rate']}/s"),
            (f"{rate:,.0f} tok/s",) * 2,
            (_clock(task.elapsed),) * 2,
            (f"eta {_clock(task.time_remaining)}",) * 2,
        ]
        return Text(fit_line(parts, str(task.description), self.width))


def progress_display(console: Console, disable: bool) -> Progress:
    """One line per model, fitted to the terminal's width (a bar only where there is room),
    so it never folds or cuts a number; off a terminal the width is unbounded
    (messages.output_console) and `run_all` prints a plain line every PLAIN_EVERY_S, since
    rich draws nothing there until the end."""
    width = console.width
    if width < FULL_LINE_WIDTH:
        columns: list[ProgressColumn] = [LineColumn(width - 1)]
    else:
        columns = [LineColumn(width - BAR_WIDTH - 2), BarColumn(bar_width=BAR_WIDTH)]
    return Progress(*columns, console=console, disable=disable, refresh_per_second=4)


def plain_line(label: str, tracker: Tracker) -> str:
    """The progress of one model as a plain line (off a terminal)."""
    fields = tracker.fields()
    elapsed = time.perf_counter() - tracker.started
    return (
        f"{label}: {tracker.done}/{tracker.total} reward {fields['reward']} errors "
        f"{fields['errors']} {fields['rate']} rollouts/s {tracker.tokens_per_s():,.0f} tok/s "
        f"{elapsed:.0f}s elapsed"
    )


async def plain_progress(progress: Progress, every_s: float) -> None:
    """Off a terminal: every `every_s`, one line per unfinished model (until cancelled)."""
    while True:
        await asyncio.sleep(every_s)
        for task in progress.tasks:
            tracker = task.fields.get("tracker")
            if isinstance(tracker, Tracker) and tracker.done < tracker.total:
                progress.console.print(plain_line(str(task.description), tracker), soft_wrap=True,
                                       highlight=False, markup=False)  # fmt: skip
