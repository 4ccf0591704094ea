"""Wordle feedback: which letters of a guess are green, yellow or gray.

The two-pass algorithm is what makes repeated letters right: greens claim their letters
first, then yellows are handed out left to right only while unclaimed copies of that letter
remain in the answer. A one-pass "is the letter anywhere in the answer" check marks too many
yellows (e.g. guess SPEED against ABIDE would show both Es yellow).
"""

from __future__ import annotations

from collections import Counter
from enum import Enum


class Mark(str, Enum):
    """Per-letter verdict. The one-letter values are what the model sees."""

    GREEN = "G"
    YELLOW = "Y"
    GRAY = "X"


def score_guess(guess: str, answer: str) -> tuple[Mark, ...]:
    """Return the marks for `guess` against `answer` (both lowercase, same length)."""
    if len(guess) != len(answer):
        raise ValueError(f"guess {guess!r} and answer {answer!r} differ in length")
    marks = [Mark.GRAY] * len(guess)
    unclaimed: Counter[str] = Counter()
    for i, (g, a) in enumerate(zip(guess, answer)):
        if g == a:
            marks[i] = Mark.GREEN
        else:
            unclaimed[a] += 1
    for i, g in enumerate(guess):
        if marks[i] is not Mark.GREEN and unclaimed[g] > 0:
            marks[i] = Mark.YELLOW
            unclaimed[g] -= 1
    return tuple(marks)


def pattern(guess: str, answer: str) -> str:
    """The marks as a compact string such as "GYXXG" (what the solver partitions on)."""
    return "".join(m.value for m in score_guess(guess, answer))
