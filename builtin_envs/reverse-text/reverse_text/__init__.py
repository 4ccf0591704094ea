"""reverse-text: reverse a sentence character by character. The smallest RL example.

One turn, a strict `<reversed>` tag parser and a dense reward (character-level similarity
to the true reversal), so even a small model gets a learning signal from partial answers. The
reference policy reverses the text it is given (LCS 1.0).
"""

from __future__ import annotations

import json
from difflib import SequenceMatcher
from importlib import resources
from typing import Any

from prime_env import Environment, Reference, Rubric, SingleTurn, State, Task, TaskSet, XMLParser

__all__ = ["PARSER", "lcs_ratio", "load_environment"]

PARSER = XMLParser(fields=("reversed",), answer_field="reversed")

SYSTEM_PROMPT = (
    "Reverse the text you are given character by character (the last character first). "
    "Answer with the reversed text only, inside <reversed>...</reversed>."
)


def lcs_ratio(completion: list[dict[str, Any]], answer: str) -> float:
    """Similarity of the parsed answer to the true reversal, in [0, 1].

    difflib's ratio is 2·M / (|a| + |b|) with M the matched characters of its longest-common-
    block alignment (an LCS approximation without quadratic memory). A reply without a
    well-formed <reversed> tag scores 0: the format is part of the task.
    """
    parsed = PARSER.parse_answer(completion)
    if parsed is None:
        return 0.0
    return SequenceMatcher(None, parsed, answer, autojunk=False).ratio()


def exact(completion: list[dict[str, Any]], answer: str) -> float:
    """1.0 for a perfect reversal (a metric: how often the dense reward is fully earned)."""
    return 1.0 if PARSER.parse_answer(completion) == answer else 0.0


def answer_chars(completion: list[dict[str, Any]]) -> float:
    return float(len(PARSER.parse_answer(completion) or ""))


def reverse(messages: list[dict[str, Any]], state: State) -> str:
    """The reference policy: the given text, reversed, in the answer tag."""
    text = str(messages[-1]["content"]).removeprefix("Text: ")
    return f"<reversed>{text[::-1]}</reversed>"


def _all_tasks() -> TaskSet:
    lines = (
        resources.files("reverse_text").joinpath("data").joinpath("texts.jsonl").read_text("utf-8")
    )
    rows = [json.loads(line) for line in lines.splitlines() if line]
    return TaskSet(
        Task(
            prompt=[{"role": "user", "content": f"Text: {row['text']}"}],
            answer=row["text"][::-1],
            info={"text": row["text"], "source": row["source"]},
            id=row["id"],
        )
        for row in rows
    )


def load_environment(
    num_train_examples: int | None = None,
    num_eval_examples: int | None = 200,
    seed: int = 0,
) -> Environment:
    """2,000 Wikipedia sentences; `num_eval_examples` of them (default 200) are held out for eval."""
    if num_eval_examples is not None and not 1 <= num_eval_examples < 2000:
        raise ValueError(f"num_eval_examples must be between 1 and 1999, got {num_eval_examples}")
    train, evals = _all_tasks().split(eval_size=num_eval_examples or 200, seed=seed)
    rubric = Rubric([lcs_ratio], metrics=[exact, PARSER.format_reward, answer_chars], parser=PARSER)
    return Environment(
        train.head(num_train_examples),
        SingleTurn(system_prompt=SYSTEM_PROMPT),
        rubric,
        name="reverse-text",
        eval_tasks=evals,
        reference=Reference(reverse, min_reward=1.0),
        correctness="exact",
    )
