"""The Wordle game loop: read a guess, validate it, answer with feedback, end the game.

An invalid reply (no `<guess>` tag, wrong length, not a word) still costs a turn, as a
wasted guess would in the real game, and gets a message that says exactly what to fix.
"""

from __future__ import annotations

from typing import Any

from prime_env import State, XMLParser, last_assistant_text

from .feedback import score_guess
from .words import valid_guesses

PARSER = XMLParser(fields=("guess",), answer_field="guess")

LEGEND = "G = right letter, right spot; Y = in the word, wrong spot; X = not in the word"


def render(guess: str, marks: str) -> str:
    """'CRANE' + 'GYXXG' -> 'C:G R:Y A:X N:X E:G', one letter:mark pair per position."""
    return " ".join(f"{letter.upper()}:{mark}" for letter, mark in zip(guess, marks))


class WordleGame:
    """`env_response` for prime_env.MultiTurn. Game progress lives in the rollout state:
    `guesses` (valid guesses so far), `invalid_guesses`, `solved`."""

    def __init__(self, max_guesses: int = 6) -> None:
        self.max_guesses = max_guesses

    def __call__(self, messages: list[dict[str, Any]], state: State) -> str:
        answer: str = state.task.answer
        guesses: list[str] = state.setdefault("guesses", [])
        state.setdefault("invalid_guesses", 0)
        state.setdefault("solved", False)
        turn = state.num_turns
        left = self.max_guesses - turn
        reply = self._check(last_assistant_text(messages) or "")
        if isinstance(reply, str):
            state["invalid_guesses"] += 1
            message = f"Invalid guess ({reply}). It counts as a turn."
        else:
            guess = reply[0]
            guesses.append(guess)
            marks = "".join(m.value for m in score_guess(guess, answer))
            if guess == answer:
                state["solved"] = True
                state.done = True
                return f"{render(guess, marks)}\nCorrect! You found the word in {turn} turn{'s' if turn != 1 else ''}."
            message = f"{render(guess, marks)}"
        if left <= 0:
            state.done = True
            return f"{message}\nOut of guesses. The word was {answer.upper()}."
        return f"{message}\n{left} guess{'es' if left != 1 else ''} left. ({LEGEND})"

    @staticmethod
    def _check(text: str) -> tuple[str] | str:
        """The guess as a 1-tuple, or a string saying why the reply is not a valid guess."""
        raw = PARSER.parse_answer(text)
        if raw is None:
            return "reply with exactly one guess as <guess>xxxxx</guess>"
        guess = raw.strip().lower()
        if len(guess) != 5 or not guess.isascii() or not guess.isalpha():
            return f"{raw!r} is not a 5-letter word"
        if guess not in valid_guesses():
            return f"{guess.upper()} is not in the word list"
        return (guess,)
