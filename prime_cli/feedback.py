"""The hub client's feedback as the `prime` commands show it on a rich console (stderr).

Notes and retries are one line each (`say`), retries in yellow; transfers draw a transient
progress bar, only on a terminal (no bar noise in logs and pipes); an installer's own output
goes to stderr as it comes, since stdout is for the command's result (e.g. JSON).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from hub_client.feedback import Feedback, TransferProgress
from prime_cli.messages import say


class _Bar:
    """One transfer's task on a rich progress display."""

    def __init__(self, progress: Progress, task: TaskID) -> None:
        self._progress, self._task = progress, task

    def reset(self, total: int | None) -> None:
        self._progress.reset(self._task, total=total)

    def advance(self, size: int) -> None:
        self._progress.update(self._task, advance=size)


def console_feedback(console: Console) -> Feedback:
    """Feedback drawn on `console`."""

    @contextmanager
    def progress(label: str, total: int | None) -> Iterator[TransferProgress]:
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=True,
            disable=not console.is_terminal,
        ) as bars:
            yield _Bar(bars, bars.add_task(label, total=total))

    return Feedback(
        note=lambda message: say(console, message),
        warn=lambda message: say(console, f"[yellow]{message}[/]"),
        progress=progress,
        installer_output=_to_stderr,
    )


def _to_stderr(line: str) -> None:
    sys.stderr.write(line)
