"""Consoles and one-line messages that read well anywhere.

rich lays out what it prints at the console's width, and where the output is not a terminal (a
log, a pipe, CI) it assumes 80 columns: tables folded every cell into one word a line, the
progress display elided its fields (`0:… eta 0:…`), a message holding a path or a URL was cut in
two. `output_console` gives a console that, off a terminal, is as wide as what it prints (unless
COLUMNS says otherwise): tables and progress keep their full width, messages their one line. On
a terminal rich keeps the window's width, and `say` still keeps a message whole.
"""

from __future__ import annotations

import os

from rich.console import Console

UNFOLDED_WIDTH = 4096
"""The width of a console that is not a terminal: wider than any table or line we print."""


def output_console(*, stderr: bool = False, soft_wrap: bool = False) -> Console:
    """A console for stdout (or stderr) that never folds at 80 columns when not a terminal."""
    console = Console(stderr=stderr, soft_wrap=soft_wrap)
    if not console.is_terminal and not os.environ.get("COLUMNS"):
        console.width = UNFOLDED_WIDTH
    return console


def say(console: Console, message: str) -> None:
    """Print `message` (rich markup allowed) as one line whatever the console's width."""
    console.print(message, soft_wrap=True)


def message_console(*, stderr: bool = False) -> Console:
    """A console for messages and one-line rows only (no tables): every line it prints stays
    whole, as `say` keeps one (`prime train`'s, whose step lines and stop messages hold paths)."""
    return output_console(stderr=stderr, soft_wrap=True)
