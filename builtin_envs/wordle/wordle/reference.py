"""The reference policy: the entropy solver (wordle.solver) playing from the feedback it is shown.

It reads its own earlier guesses and their marks off the transcript, as a player reads the
screen (the game's `C:G R:Y A:X N:X E:G` lines), never the hidden word, and replies with just
the guess in the format the system prompt asks for.
"""

from __future__ import annotations

import re
from typing import Any

from prime_env import State

from .solver import Solver

_MARKS = re.compile(r"\b([A-Z]):([GYX])\b")


def history(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(guess, marks) for each feedback line in the game's messages so far."""
    seen = []
    for message in messages:
        if message["role"] == "user":
            marks = _MARKS.findall(str(message["content"]))
            if len(marks) == 5:
                seen.append(("".join(c for c, _ in marks).lower(), "".join(m for _, m in marks)))
    return seen


def solve(messages: list[dict[str, Any]], state: State) -> str:
    return f"<guess>{Solver.from_history(history(messages)).next_guess()}</guess>"
