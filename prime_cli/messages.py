"""One-line messages, printed whole.

rich wraps what it prints at the console's width, 80 columns where the output is not a terminal
(a log, a pipe, CI), which cut a message holding a path or a URL in two. With soft wrap a message
stays one line, to be copied or grepped; a terminal still wraps it on screen. Tables and live
displays keep rich's own layout.
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
