"""arithmetic: generated integer arithmetic with a difficulty knob and a brevity group reward.

Shows the two rubric features most RL recipes want: a correctness reward and a GROUP reward
(a bonus for the shortest correct completions among the rollouts of one problem, which
pushes a policy towards concise answers without rewarding short wrong ones). The reference
policy (`arithmetic.reference`) computes the expression and answers `\\boxed{N}`: 1.2
everywhere. `correct` is its correctness metric. `boxed_integer` is the format signal a
recipe may pay to bootstrap the box: it never pays the system prompt's example answer copied
as a wrong answer (an RL run that paid any box learned to answer `\\boxed{42}` to everything).

It ships a training recipe for SmolLM2-135M (`train/smollm2-135m.toml`): `prime train
prime/arithmetic` uses it.
"""

from __future__ import annotations

import random
from typing import Any

from prime_env import (
    BoxedParser,
    Environment,
    Reference,
    Rubric,
    SingleTurn,
    Task,
    TaskSet,
    last_assistant_text,
)

from .problems import LEVELS, generate
from .reference import solve

__all__ = [
    "EXAMPLE_ANSWER",
    "LEVELS",
    "PARSER",
    "boxed_integer",
    "copied_example",
    "correct",
    "generate",
    "load_environment",
    "shortest_correct",
]

PARSER = BoxedParser()

EXAMPLE_ANSWER = 42
"""The answer the system prompt shows as an example of the format."""
SYSTEM_PROMPT = (
    "Solve the arithmetic problem. Give the final answer as an integer in \\boxed{}, "
    f"e.g. \\boxed{{{EXAMPLE_ANSWER}}}."
)


def _parsed_int(completion: list[dict[str, Any]]) -> int | None:
    text = PARSER.parse_answer(completion)
    if text is None:
        return None
    try:
        return int(text.replace(",", "").strip())
    except ValueError:
        return None


def correct(completion: list[dict[str, Any]], answer: int) -> float:
    """1.0 when the boxed integer equals the answer."""
    return 1.0 if _parsed_int(completion) == int(answer) else 0.0


def copied_example(completion: list[dict[str, Any]], answer: int) -> float:
    """1.0 when the boxed answer is the system prompt's example and that is wrong."""
    return 1.0 if _parsed_int(completion) == EXAMPLE_ANSWER != int(answer) else 0.0


def boxed_integer(completion: list[dict[str, Any]], answer: int) -> float:
    """1.0 for an integer in \\boxed{}, unless it is the prompt's example copied as a wrong
    answer: a format bonus that cannot be farmed by copying the example."""
    if _parsed_int(completion) is None:
        return 0.0
    return 1.0 - copied_example(completion, answer)


def shortest_correct(completions: list[list[dict[str, Any]]], answers: list[int]) -> list[float]:
    """Group reward: 1.0 for every correct completion of minimal length in the group, else 0.

    Wrong answers never get the bonus, so brevity is only rewarded on top of correctness.
    """
    lengths = [len(last_assistant_text(c) or "") for c in completions]
    ok = [correct(c, a) == 1.0 for c, a in zip(completions, answers)]
    best = min((n for n, good in zip(lengths, ok) if good), default=None)
    return [1.0 if good and n == best else 0.0 for n, good in zip(lengths, ok)]


def completion_chars(completion: list[dict[str, Any]]) -> float:
    return float(len(last_assistant_text(completion) or ""))


def completion_tokens(state: dict[str, Any]) -> float:
    return float(state["usage"]["completion_tokens"])


def _tasks(
    difficulty: int, count: int, rng: random.Random, exclude: set[str], prefix: str
) -> TaskSet:
    tasks: list[Task] = []
    seen = set(exclude)
    attempts = 0
    while len(tasks) < count and attempts < count * 50:
        attempts += 1
        expression, value = generate(difficulty, rng)
        if expression in seen:
            continue
        seen.add(expression)
        tasks.append(
            Task(
                prompt=[{"role": "user", "content": f"Compute: {expression}"}],
                answer=value,
                info={"expression": expression, "difficulty": difficulty},
                id=f"{prefix}-d{difficulty}-{len(tasks):05d}",
            )
        )
    return TaskSet(tasks)


def load_environment(
    difficulty: int = 3,
    num_train_examples: int = 5000,
    num_eval_examples: int = 200,
    seed: int = 0,
) -> Environment:
    """Problems at `difficulty` 1 (one-digit sums) to 5 (4-6 operators, 4-digit numbers).

    Eval problems are generated first and never reappear in training. Easy levels have few
    distinct problems, so the sets may come out smaller than asked (difficulty 1 has 100).
    Reward = correct + 0.2 × shortest_correct; `correct` is the correctness metric.
    """
    if difficulty not in LEVELS:
        raise ValueError(f"difficulty must be one of {sorted(LEVELS)}, got {difficulty!r}")
    if num_train_examples < 0 or num_eval_examples < 1:
        raise ValueError("num_train_examples must be >= 0 and num_eval_examples >= 1")
    rng = random.Random(f"arithmetic-{seed}-{difficulty}")
    evals = _tasks(difficulty, num_eval_examples, rng, set(), "eval")
    train = _tasks(
        difficulty, num_train_examples, rng, {t.info["expression"] for t in evals}, "train"
    )
    rubric = Rubric(
        [correct, shortest_correct],
        weights=[1.0, 0.2],
        metrics=[
            completion_chars,
            completion_tokens,
            PARSER.format_reward,
            boxed_integer,
            copied_example,
        ],
        parser=PARSER,
    )
    return Environment(
        train,
        SingleTurn(system_prompt=SYSTEM_PROMPT),
        rubric,
        name="arithmetic",
        eval_tasks=evals,
        reference=Reference(solve, min_reward=1.2),
        correctness="correct",
    )
