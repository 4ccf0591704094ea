"""arithmetic: generator correctness, difficulty, group brevity reward, oracle and anti-oracle."""

from __future__ import annotations

import random
import re

import pytest
from arithmetic import LEVELS, generate, load_environment, shortest_correct
from arithmetic.reference import evaluate

from prime_env import run_rollouts
from prime_env.reference_check import validate_reference
from tests.builtin_envs.policy import PolicyClient, mean_reward


def _reference_value(expression: str) -> int:
    # Python's own parser and precedence rules as an independent check of the tree renderer.
    assert re.fullmatch(r"[\d+\-*() ]+", expression)
    return eval(compile(expression, "<problem>", "eval"), {"__builtins__": {}})


@pytest.mark.parametrize("difficulty", sorted(LEVELS))
def test_rendered_expression_evaluates_to_the_answer(difficulty: int) -> None:
    rng = random.Random(difficulty)
    for _ in range(300):
        expression, value = generate(difficulty, rng)
        assert _reference_value(expression) == value


def test_difficulty_grows() -> None:
    rng = random.Random(0)

    def mean_ops(d: int) -> float:
        return sum(len(re.findall(r" [+\-*] ", generate(d, rng)[0])) for _ in range(200)) / 200

    assert mean_ops(1) < mean_ops(3) < mean_ops(5)


def test_eval_problems_never_appear_in_training() -> None:
    env = load_environment(difficulty=2, num_train_examples=2000, num_eval_examples=200)
    train = {t.info["expression"] for t in env.tasks}
    evals = {t.info["expression"] for t in env.get_eval_tasks()}
    assert len(evals) == 200 and not train & evals
    small = load_environment(difficulty=1)
    assert len(small.get_eval_tasks()) + len(small.tasks) <= 100  # only 100 one-digit sums exist


def _boxed(value: int, padding: str = "") -> dict:
    return [{"role": "assistant", "content": f"{padding}\\boxed{{{value}}}"}]


def test_group_bonus_goes_to_the_shortest_correct_completions_only() -> None:
    completions = [
        _boxed(7, "So it is "),
        _boxed(7),
        _boxed(7),
        _boxed(8),
        [{"role": "assistant", "content": "7"}],
    ]
    assert shortest_correct(completions, [7] * 5) == [0.0, 1.0, 1.0, 0.0, 0.0]
    assert shortest_correct([_boxed(1), _boxed(2)], [3, 3]) == [0.0, 0.0]


@pytest.mark.parametrize("difficulty", sorted(LEVELS))
async def test_the_shipped_reference_answers_correctly_and_concisely(difficulty: int) -> None:
    env = load_environment(difficulty=difficulty, num_eval_examples=60)
    report = await validate_reference(env)
    assert report.passed and report.lowest == pytest.approx(1.2)
    assert all(r.rewards == {"correct": 1.0, "shortest_correct": 1.0} for r in report.records)


def test_the_reference_evaluates_syntax_never_text() -> None:
    assert evaluate("12 - (3 + 4) * (-2)") == 26
    with pytest.raises(ValueError, match="not an integer"):
        evaluate("__import__('os').getcwd()")
    with pytest.raises(ValueError, match="not an integer"):
        evaluate("7 / 2")


async def test_verbose_correct_answers_lose_the_group_bonus() -> None:
    env = load_environment(difficulty=3, num_eval_examples=5)
    answers = {t.prompt[-1]["content"]: t.answer for t in env.get_eval_tasks()}
    calls = iter(range(1000))
    client = PolicyClient(
        lambda m: "Working. " * (next(calls) % 3) + f"\\boxed{{{answers[m[-1]['content']]}}}"
    )
    records = await run_rollouts(env, client, n=5, r=3, concurrency=1)
    for index in range(5):
        group = [r for r in records if r.example_index == index]
        bonus = sorted(r.rewards["shortest_correct"] for r in group)
        assert bonus == [0.0, 0.0, 1.0]


async def test_guessing_and_empty_policies_score_low() -> None:
    env = load_environment(difficulty=3, num_eval_examples=40)
    rng = random.Random(0)
    assert await mean_reward(env, lambda m: f"\\boxed{{{rng.randint(-100, 1000)}}}", 40) < 0.1
    assert await mean_reward(env, lambda m: "", 40) == 0.0


def test_bad_arguments_are_rejected_clearly() -> None:
    with pytest.raises(ValueError, match="difficulty must be one of"):
        load_environment(difficulty=9)
