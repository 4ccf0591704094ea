"""An entropy-maximising Wordle solver: the oracle policy for tests and a baseline to beat.

It keeps the answers consistent with all feedback so far and guesses the word (from the full
guess list) whose feedback splits those candidates most evenly. Feedback patterns for many
(guess, answer) pairs are computed at once with numpy, so a whole game takes milliseconds.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .feedback import pattern
from .words import all_words, answers


def _encode(words: Sequence[str]) -> np.ndarray:
    return np.frombuffer("".join(words).encode("ascii"), dtype=np.uint8).reshape(len(words), 5)


def pattern_codes(guesses: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Base-3 feedback codes (0 gray, 1 yellow, 2 green per position), shape (guesses, targets).

    The same two-pass rule as `feedback.score_guess`, vectorised: position i is yellow when it
    is not green and the answer holds more unclaimed (non-green) copies of its letter than the
    guess spends on earlier non-green positions with that same letter.
    """
    eq = [[guesses[:, i, None] == targets[None, :, j] for j in range(5)] for i in range(5)]
    green = [eq[i][i] for i in range(5)]
    not_green = [~x for x in green]
    codes = np.zeros((len(guesses), len(targets)), dtype=np.int32)
    for i in range(5):
        unclaimed = sum((eq[i][j] & not_green[j]).astype(np.int8) for j in range(5))
        spent = sum(
            ((guesses[:, k, None] == guesses[:, i, None]) & not_green[k]).astype(np.int8)
            for k in range(i)
        )
        yellow = not_green[i] & (unclaimed > spent)
        codes += (green[i] * 2 + yellow) * 3**i
    return codes


def code_of(marks: str) -> int:
    """Encode a "GYXXG" pattern string the way `pattern_codes` does."""
    value = {"X": 0, "Y": 1, "G": 2}
    return sum(value[c] * 3**i for i, c in enumerate(marks))


OPENER = "raise"
"""The entropy-best first guess for the shipped lists (`best_guess(all answers)`; a test checks
it). A constant because computing it scores all 4,667 guesses against all answers (seconds)."""


def best_guess(candidates: tuple[str, ...]) -> str:
    if len(candidates) <= 2:
        return candidates[0]
    pool = all_words()
    codes = pattern_codes(_encode(pool), _encode(candidates))
    offsets = np.arange(len(pool), dtype=np.int64)[:, None] * 3**5
    counts = np.bincount((codes + offsets).ravel(), minlength=len(pool) * 3**5)
    p = counts.reshape(len(pool), 3**5) / len(candidates)
    with np.errstate(divide="ignore", invalid="ignore"):
        entropy = -(np.where(p > 0, p * np.log2(p), 0.0)).sum(axis=1)
    # A candidate can win right now; weigh that chance against information gained.
    entropy += np.isin(np.array(pool), np.array(candidates)) * (2.0 / len(candidates))
    return pool[int(np.argmax(entropy))]


class Solver:
    """Plays one game: call `next_guess()`, then `observe(guess, marks)` with the feedback."""

    def __init__(self, candidates: Sequence[str] | None = None) -> None:
        """`candidates` defaults to every possible hidden word (train and eval answers)."""
        self.candidates: tuple[str, ...] = tuple(
            candidates if candidates is not None else answers("train") + answers("eval")
        )
        self._first = True

    @classmethod
    def from_history(cls, history: Sequence[tuple[str, str]]) -> Solver:
        """A solver that has already seen these (guess, marks) pairs, e.g. read off a transcript."""
        solver = cls()
        for guess, marks in history:
            solver._first = False
            solver.observe(guess, marks)
        return solver

    def next_guess(self) -> str:
        if not self.candidates:
            raise RuntimeError("no word is consistent with the feedback given")
        if self._first:
            self._first = False
            return OPENER
        return best_guess(self.candidates)

    def observe(self, guess: str, marks: str) -> None:
        """Keep only candidates that would have produced `marks` for `guess`."""
        self.candidates = tuple(c for c in self.candidates if pattern(guess, c) == marks)
