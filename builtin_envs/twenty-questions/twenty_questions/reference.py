"""The reference policy: keep the objects every answer so far allows, ask what splits them best.

It reads its own questions and the user's answers off the dialogue (never the secret): a "Yes"
keeps the objects with the attribute asked about, anything else those without it, and a guess
the user denied drops that object. It asks about the attribute that splits the candidates most
evenly and guesses once no question tells them apart, so it finds any of the 50 objects in a
handful of questions.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from prime_env import State

from .answerer import CONFIRMATION, article, attribute, guessed
from .objects import ATTRIBUTES, OBJECTS


def candidates(messages: list[dict[str, Any]]) -> tuple[set[str], set[str]]:
    """The objects still consistent with the dialogue, and the attributes already asked about."""
    left = set(OBJECTS)
    asked: set[str] = set()
    for question, reply in pairwise(messages):
        if question["role"] != "assistant" or reply["role"] != "user":
            continue
        text, said = str(reply.get("content") or ""), str(question.get("content") or "")
        guess = guessed(said)
        if guess is not None:
            if not text.startswith(CONFIRMATION):
                left.discard(guess)
            continue
        name = attribute(said)
        if name is not None:
            asked.add(name)
            left = {c for c in left if (name in OBJECTS[c]) == text.startswith("Yes")}
    return left, asked


def solve(messages: list[dict[str, Any]], state: State) -> str:
    """The next question, or a guess when no unasked attribute splits the candidates."""
    left, asked = candidates(messages)
    if not left:  # the answers contradict every object (a model playing the user erred)
        left = set(OBJECTS)

    def split(name: str) -> int:
        return sum(name in OBJECTS[c] for c in left)

    splitting = [n for n in ATTRIBUTES if n not in asked and 0 < split(n) < len(left)]
    if not splitting:
        name = min(left)
        return f"Is it {article(name)} {name}?"
    best = min(splitting, key=lambda n: abs(2 * split(n) - len(left)))
    return f"Is it {ATTRIBUTES[best][0]}?"
