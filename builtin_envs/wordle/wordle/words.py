"""The word lists shipped in the package, and the deterministic train/eval answer split."""

from __future__ import annotations

import hashlib
from functools import cache
from importlib import resources

EVAL_FRACTION_PERCENT = 20


@cache
def _read(name: str) -> tuple[str, ...]:
    text = resources.files("wordle").joinpath("data", name).read_text(encoding="utf-8")
    return tuple(line for line in text.splitlines() if line)


def valid_guesses() -> frozenset[str]:
    """Every 5-letter lowercase English word accepted as a guess."""
    return frozenset(_read("words.txt"))


def all_words() -> tuple[str, ...]:
    """The valid guesses in a stable (sorted) order."""
    return _read("words.txt")


def _is_eval(word: str) -> bool:
    # A hash split rather than a shuffled cut: adding a word to the list later never moves
    # an existing answer between train and eval, so eval scores stay comparable.
    digest = hashlib.sha256(word.encode()).digest()
    return int.from_bytes(digest[:4], "big") % 100 < EVAL_FRACTION_PERCENT


def answers(split: str) -> tuple[str, ...]:
    """Hidden words for `split` ("train" or "eval"); the two sets are disjoint."""
    if split not in ("train", "eval"):
        raise ValueError(f"unknown split {split!r}: use 'train' or 'eval'")
    want_eval = split == "eval"
    return tuple(w for w in _read("answers.txt") if _is_eval(w) == want_eval)
