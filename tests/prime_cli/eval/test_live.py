"""The live line of `prime eval run`: fitted to the terminal (never folded, no number cut) at
any width, and off a terminal a plain line every few seconds instead of silence."""

from __future__ import annotations

import asyncio
import io
import time

import pytest
from rich.console import Console

from prime_cli.eval.live import Tracker, plain_progress, progress_display

NAMES = ["openai/gpt-4.1-mini", "anthropic/claude-sonnet-4-5-20250929", "local/smollm2-135m"]


def tracker() -> Tracker:
    made = Tracker(total=1000, done=537, scored=500, reward_sum=412.0, errors=37, tokens=12_345)
    made.started -= 230
    return made


@pytest.mark.parametrize("width", [40, 60, 80, 100, 119, 120, 160])
def test_the_live_line_fits_the_terminal(width: int) -> None:
    out = io.StringIO()
    console = Console(width=width, force_terminal=True, file=out, color_system=None)
    progress = progress_display(console, disable=False)
    for name in NAMES:
        made = tracker()
        progress.add_task(name, total=1000, completed=537, tracker=made, **made.fields())
    console.print(progress.get_renderable())
    lines = out.getvalue().splitlines()
    assert len(lines) == len(NAMES), lines  # one line a model: nothing folded
    for line in lines:
        assert len(line) <= width, line
        assert "537/1000" in line and ("r 0.824" in line or "reward 0.824" in line), line
        assert "…" not in line.split("537/1000")[1], line  # only a long name is ever cut
    if width >= 100:
        assert all("rollouts/s" in line for line in lines if "claude" not in line)


async def test_off_a_terminal_a_plain_line_comes_every_few_seconds() -> None:
    out = io.StringIO()
    console = Console(width=10_000, force_terminal=False, file=out)
    progress = progress_display(console, disable=False)
    made = tracker()
    progress.add_task("local/smollm2-135m", total=1000, tracker=made, **made.fields())
    done = Tracker(total=4, done=4)
    progress.add_task("finished-model", total=4, tracker=done, **done.fields())
    beat = asyncio.create_task(plain_progress(progress, every_s=0.05))
    start = time.monotonic()
    while out.getvalue().count("\n") < 2 and time.monotonic() - start < 10:
        await asyncio.sleep(0.02)
    beat.cancel()
    lines = out.getvalue().splitlines()
    assert len(lines) >= 2 and lines[0].startswith("local/smollm2-135m: 537/1000 reward 0.824")
    assert "rollouts/s" in lines[0] and "tok/s" in lines[0] and "elapsed" in lines[0]
    assert not any("finished-model" in line for line in lines)  # a finished model is quiet
