"""The scripted user: answers a yes/no question about the secret object, offline.

A question is read by keywords (`objects.ATTRIBUTES`); "is it a <name>?" is a guess. What it
cannot read it says so, naming some questions it understands, as a person would.
"""

from __future__ import annotations

import re

from prime_env import State

from .objects import ATTRIBUTES, OBJECTS

CONFIRMATION = "Yes! You got it"
"""How the user (scripted or played by a model) confirms the object; the rubric looks for it."""
SOLVED = CONFIRMATION + ": it is {article} {name}."
UNCLEAR = (
    "I can only answer yes/no questions about the object, for example: "
    "Is it an animal? Can it fly? Is it used in the kitchen? Or guess: Is it a dog?"
)


def article(name: str) -> str:
    return "an" if name[0] in "aeiou" else "a"


def _normal(text: str) -> str:
    return " ".join(re.sub(r"[^a-z ]", " ", text.lower()).split())


def guessed(question: str) -> str | None:
    """The object a question names as a guess ("is it a dog", "it's a fork"), if any."""
    text = f" {_normal(question)} "
    for name in sorted(OBJECTS, key=len, reverse=True):
        if f" {name} " in text or f" {name}s " in text:
            return name
    return None


def attribute(question: str) -> str | None:
    text = f" {_normal(question)} "
    for name, words in ATTRIBUTES.items():
        if any(f" {word} " in text for word in words):
            return name
    return None


def answer(question: str, secret: str) -> tuple[str, bool]:
    """The answer to `question` about `secret`, and whether the object was found."""
    guess = guessed(question)
    if guess is not None:
        if guess == secret:
            return SOLVED.format(article=article(secret), name=secret), True
        return f"No, it is not {article(guess)} {guess}.", False
    found = attribute(question)
    if found is None:
        return UNCLEAR, False
    return ("Yes." if found in OBJECTS[secret] else "No."), False


def scripted_user(max_questions: int):
    """A `SimulatedUser` script: answers the model's last turn about the task's secret, and
    ends the game when the object is found or the questions run out."""

    def reply(messages: list[dict], state: State) -> str:
        secret = str(state.task.answer)
        question = str(messages[-1].get("content") or "")
        text, solved = answer(question, secret)
        asked = sum(m["role"] == "assistant" for m in messages)
        if solved:
            return f"{text} ###DONE###"
        if asked >= max_questions:
            return (
                f"{text} That was question {asked}; it was {article(secret)} {secret}. ###DONE###"
            )
        return text

    return reply
