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
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from prime_env.clients.base import ModelClient
from prime_env.evaluation import EvalRun, execute
from prime_env.parallel import ClientFactory
from prime_env.record import RolloutRecord
from prime_env.summary import Summary

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


class TokensPerSecond(ProgressColumn):
    """Rendered on every refresh (rich's own thread), so it moves between finished rollouts."""

    def render(self, task: Task) -> Text:
        tracker = task.fields.get("tracker")
        rate = tracker.tokens_per_s() if isinstance(tracker, Tracker) else 0.0
        return Text(f"{rate:,.0f} tok/s")


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
    try:
        return list(await asyncio.gather(*(one(*run) for run in runs)))
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


def progress_display(console: Console, disable: bool) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("reward {task.fields[reward]}"),
        TextColumn("errors {task.fields[errors]}"),
        TextColumn("{task.fields[rate]} rollouts/s"),
        TokensPerSecond(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        console=console,
        disable=disable,
        refresh_per_second=4,
    )
