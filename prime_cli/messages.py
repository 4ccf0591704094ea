"""One-line messages, printed whole.

Why: rich wraps what it prints at the console's width, and where the output is not a terminal
(a log file, a pipe, CI) that width is 80 columns, so a message holding a run directory, a
settings path or a URL was cut in two mid-path (`resuming /tmp/.../out/tra`, a newline,
`in/...`): it can no longer be copied, and a test or a script grepping the line misses it
depending on how long the path happens to be. With soft wrap a message stays one line; a
terminal still wraps it on screen. Tables and live displays keep rich's own layout.
"""

from __future__ import annotations

from rich.console import Console


def say(console: Console, message: str) -> None:
    """Print `message` (rich markup allowed) as one line whatever the console's width."""
    console.print(message, soft_wrap=True)


def message_console(*, stderr: bool = False) -> Console:
    """A console for messages and one-line rows only (no tables): every line it prints stays
    whole, as `say` keeps one (`prime train`'s, whose step lines and stop messages hold paths)."""
    return Console(stderr=stderr, soft_wrap=True)
