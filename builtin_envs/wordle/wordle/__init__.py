"""Wordle: find a hidden 5-letter English word in six guesses from per-letter feedback.

The smallest multi-turn environment: `MultiTurn` with a game that answers every guess, a
deterministic train/eval split of answers, and a solver (`wordle.solver.Solver`) that plays
from feedback alone: the environment's reference policy (`wordle.reference`).
"""

from __future__ import annotations

from typing import Any

from prime_env import Environment, MultiTurn, Reference, Rubric, Task, TaskSet

from .feedback import Mark, pattern, score_guess
from .game import PARSER, WordleGame
from .reference import solve
from .words import answers

__all__ = ["Mark", "WordleGame", "load_environment", "pattern", "score_guess"]

SYSTEM_PROMPT = """You are playing Wordle. Find the hidden 5-letter English word in at most {max_guesses} guesses.
After each guess you get one mark per letter: G = right letter in the right spot, Y = the letter is in the word but in another spot, X = the letter is not in the word (or not that many times).
Think briefly if you like, then end every reply with exactly one guess in this format: <guess>crane</guess>"""

USER_PROMPT = "A new game: the hidden word has 5 letters. Make your first guess."

REFERENCE_MEAN = 1.1
"""What the reference solver averages at least: it wins 625 of the 626 eval games in ≤ 6 guesses
(each win ≥ 1.1; its mean on them is in docs/builtin_envs.md)."""


def solved(state: dict[str, Any]) -> float:
    """1.0 when the hidden word was found."""
    return 1.0 if state.get("solved") else 0.0


def speed(state: dict[str, Any]) -> float:
    """Partial credit for fewer guesses: 1.0 for a first-guess win, down to 0.0 at six."""
    if not state.get("solved"):
        return 0.0
    return max(0.0, (6 - len(state.get("responses", []))) / 5)


def format_ok(completion: list[dict[str, Any]]) -> float:
    """Share of the model's turns that contain a well-formed <guess> tag."""
    turns = [m for m in completion if m.get("role") == "assistant"]
    if not turns:
        return 0.0
    return sum(PARSER.format_reward([m]) for m in turns) / len(turns)


def turns(state: dict[str, Any]) -> float:
    return float(len(state.get("responses", [])))


def invalid_guesses(state: dict[str, Any]) -> float:
    return float(state.get("invalid_guesses", 0))


def _tasks(words: tuple[str, ...], split: str, limit: int | None, seed: int) -> TaskSet:
    tasks = TaskSet(
        Task(
            prompt=[{"role": "user", "content": USER_PROMPT}],
            answer=w,
            info={"split": split},
            id=f"{split}-{w}",
        )
        for w in words
    ).shuffle(seed)
    return tasks.head(limit) if limit is not None else tasks


def load_environment(
    max_guesses: int = 6,
    num_train_examples: int | None = None,
    num_eval_examples: int | None = None,
    seed: int = 0,
) -> Environment:
    """Train games use the train answers, `prime eval run` the disjoint eval answers.

    Reward = solved (1.0) + 0.1 × speed + 0.1 × format, so a win scores 1.1 to 1.2.
    """
    if not 1 <= max_guesses <= 20:
        raise ValueError(f"max_guesses must be between 1 and 20, got {max_guesses}")
    rubric = Rubric(
        [solved, speed, format_ok],
        weights=[1.0, 0.1, 0.1],
        metrics=[turns, invalid_guesses],
        parser=PARSER,
    )
    harness = MultiTurn(
        WordleGame(max_guesses),
        max_turns=max_guesses,
        system_prompt=SYSTEM_PROMPT.format(max_guesses=max_guesses),
    )
    return Environment(
        _tasks(answers("train"), "train", num_train_examples, seed),
        harness,
        rubric,
        name="wordle",
        eval_tasks=_tasks(answers("eval"), "eval", num_eval_examples, seed),
        reference=Reference(solve, mean_reward=REFERENCE_MEAN),
        correctness="solved",
    )
