"""twenty-questions: the model finds a secret object by asking a simulated user yes/no questions.

The user is a `SimulatedUser`: by default a script that knows each object's facts
(answerer.py), so the game runs offline; `user="openai/gpt-4.1-mini"` (any model spec) has a
model play it from a prompt instead. The rubric needs the whole dialogue: whether the user
confirmed the guess, how many questions it took, and whether questions were repeated or could
not be answered. The user's turns are never trained: they are in the prompts, and the record
marks them (`trace.simulated`). The reference policy (`twenty_questions.reference`) narrows the
objects down from the answers and finds each in at most `REFERENCE_QUESTIONS` questions.
"""

from __future__ import annotations

import random

from prime_env import Conversation, Environment, Reference, Rubric, SimulatedUser, State, Task

from .answerer import CONFIRMATION, UNCLEAR, answer, guessed, scripted_user
from .objects import ATTRIBUTES, OBJECTS
from .reference import solve

__all__ = ["ATTRIBUTES", "OBJECTS", "REFERENCE_QUESTIONS", "answer", "guessed", "load_environment"]

SYSTEM_PROMPT = """We are playing twenty questions. The user is thinking of an object.
Ask one yes/no question per turn to narrow it down (e.g. "Is it an animal?"), then guess with
"Is it a <object>?". Find it in as few questions as you can."""

OPENING = "I'm thinking of an object. Ask me yes/no questions to find out what it is."

USER_PROMPT = """You are playing twenty questions. You are thinking of: {answer}.
The other player asks yes/no questions. Answer each truthfully with "Yes." or "No." only.
When they guess it exactly, say "Yes! You got it: it is {answer}." and then ###DONE###."""


def _user_turns(state: State) -> list[str]:
    messages = state.prompt + state.completion
    return [str(messages[i].get("content") or "") for i in state.get("simulated", [])]


def _questions(state: State) -> list[str]:
    return [str(m.get("content") or "") for m in state.completion if m["role"] == "assistant"]


def solved(state: State, answer: str) -> float:
    """1.0 when the user confirmed a guess of the object."""
    return 1.0 if any(_confirms(turn, answer) for turn in _user_turns(state)) else 0.0


def _confirms(turn: str, answer: str) -> bool:
    return turn.startswith(CONFIRMATION) and answer in turn


def efficiency(state: State, answer: str, max_questions: int) -> float:
    """Solved, and in few questions: 1.0 for a first-question guess, down to 0.5 at the limit."""
    if not solved(state, answer):
        return 0.0
    return solved_in(len(_questions(state)), max_questions)


def solved_in(asked: int, max_questions: int) -> float:
    """The reward of a game solved with `asked` questions (the guess included)."""
    return 1.0 - 0.5 * (asked - 1) / max(max_questions - 1, 1)


def questions(state: State) -> float:
    return float(len(_questions(state)))


def repeated(state: State) -> float:
    """Questions asked again word for word: wasted turns."""
    asked = [" ".join(q.lower().split()) for q in _questions(state)]
    return float(len(asked) - len(set(asked)))


def unanswerable(state: State) -> float:
    """Turns the user could not read as a yes/no question or a guess."""
    return float(sum(turn.startswith(UNCLEAR) for turn in _user_turns(state)))


REFERENCE_QUESTIONS = 8
"""The most questions (the guess included) the reference policy needs for any of the objects;
what it declares follows: every game solved in at most this many questions."""


def load_environment(
    num_tasks: int = 200,
    num_eval_examples: int = 20,
    max_questions: int = 20,
    user: str | None = None,
    seed: int = 0,
) -> Environment:
    """`user`: None for the scripted answerer (offline), or a model spec to play the user."""
    if max_questions < 1:
        raise ValueError(f"max_questions must be at least 1, got {max_questions}")
    rng = random.Random(seed)
    names = sorted(OBJECTS)

    def task(i: int, split: str) -> Task:
        secret = rng.choice(names)
        return Task(
            prompt=[{"role": "user", "content": OPENING}],
            answer=secret,
            info={"max_questions": max_questions},
            id=f"{split}-{i}-{secret.replace(' ', '-')}",
        )

    train = [task(i, "train") for i in range(num_tasks)]
    evals = [task(i, "eval") for i in range(num_eval_examples)]
    simulated = (
        SimulatedUser(script=scripted_user(max_questions), max_turns=max_questions)
        if user is None
        else SimulatedUser(user, prompt=USER_PROMPT, max_turns=max_questions)
    )

    def efficient(state: State, answer: str) -> float:
        return efficiency(state, answer, max_questions)

    rubric = Rubric([efficient], metrics=[solved, questions, repeated, unanswerable])
    harness = Conversation(simulated, system_prompt=SYSTEM_PROMPT, max_turns=max_questions)
    return Environment(
        train,
        harness,
        rubric,
        name="twenty-questions",
        eval_tasks=evals,
        reference=Reference(solve, min_reward=solved_in(REFERENCE_QUESTIONS, max_questions)),
    )
