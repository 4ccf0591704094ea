"""reverse-text: data, strict parser, LCS-ratio reward, oracle and anti-oracle runs."""

from __future__ import annotations

import random

import pytest
from reverse_text import lcs_ratio, load_environment

from prime_env.reference_check import validate_reference
from tests.builtin_envs.policy import mean_reward


def _text(messages: list[dict]) -> str:
    return messages[-1]["content"].removeprefix("Text: ")


def test_tasks_are_real_sentences_with_true_reversals() -> None:
    env = load_environment()
    assert len(env.tasks) == 1800 and len(env.get_eval_tasks()) == 200
    assert not {t.id for t in env.tasks} & {t.id for t in env.get_eval_tasks()}
    for task in env.get_eval_tasks():
        text = task.info["text"]
        assert 30 <= len(text) <= 90 and text.isascii()
        assert task.answer == text[::-1] and task.prompt[-1]["content"] == f"Text: {text}"


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("<reversed>cba</reversed>", 1.0),
        ("sure: <reversed>\ncba\n</reversed>", 1.0),
        ("<reversed>cb</reversed>", 0.8),  # 2·2 / (2 + 3)
        ("<reversed>abc</reversed>", 2 / 6),  # one matched block of one char
        ("cba", 0.0),  # no tag: the strict parser gives no credit
        ("<reversed>cba", 0.0),  # unclosed
        ("<reversed>cba</reversed><reversed>cba</reversed>", 0.0),  # two answers
    ],
)
def test_lcs_ratio_reward(reply: str, expected: float) -> None:
    completion = [{"role": "assistant", "content": reply}]
    assert lcs_ratio(completion, "cba") == pytest.approx(expected)


async def test_the_shipped_reference_reverses_perfectly() -> None:
    report = await validate_reference(load_environment())
    assert report.passed and len(report.records) == 200 and report.errors == 0
    assert all(r.metrics["exact"] == 1.0 for r in report.records)


async def test_copying_scrambling_and_empty_policies_score_low() -> None:
    env = load_environment()
    assert await mean_reward(env, lambda m: f"<reversed>{_text(m)}</reversed>", 40) < 0.4
    rng = random.Random(0)

    def shuffled(m: list[dict]) -> str:
        return "<reversed>" + "".join(rng.sample(_text(m), len(_text(m)))) + "</reversed>"

    assert await mean_reward(env, shuffled, 40) < 0.5
    assert await mean_reward(env, lambda m: "", 40) == 0.0


def test_bad_arguments_are_rejected_clearly() -> None:
    with pytest.raises(ValueError, match="num_eval_examples must be between 1 and 1999"):
        load_environment(num_eval_examples=0)
