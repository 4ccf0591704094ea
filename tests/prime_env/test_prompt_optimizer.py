"""prompt_optimizer's append mode and several proposals per minibatch: each reply adds one
sentence to the parent's prompt, duplicates are asked once, only the best child that beats its
parent is scored on validation, and the others are recorded as dropped."""

from __future__ import annotations

import asyncio
from typing import Any

from prime_env.clients.base import SamplingArgs
from prime_env.prompt_optimizer import OptimizeConfig, optimize_prompt, parse_sentence
from testing.envs import instruction_env
from tests.prime_env.scripted import ScriptedClient


def obeys_say(messages: list[dict[str, Any]], tools: Any) -> str:
    """instruction_env's fake model: the word alone after a prompt ending in `say:`."""
    instruction, _, word = str(messages[-1]["content"]).rpartition("\n\n")
    return word if instruction.endswith("say:") else str(messages[-1]["content"])


def test_append_mode_keeps_the_best_of_several_proposals() -> None:
    env = instruction_env.load_environment(num_tasks=16)
    model = ScriptedClient(obeys_say)
    reflection = ScriptedClient(["Be brief.", '"say:"\nbecause it helps', "say:"])
    sampling = SamplingArgs(max_tokens=16, temperature=1.0)
    config = OptimizeConfig(
        budget=30, minibatch=2, val_size=4, test_size=4, proposals=3, mode="append",
        reflection_sampling=sampling,
    )  # fmt: skip
    result = asyncio.run(optimize_prompt(env, model, reflection, config))
    assert result.best.prompt == "Answer the question. say:"
    assert [c.prompt for c in result.candidates] == ["Answer the question.", result.best.prompt]
    assert [(r.prompt, r.minibatch) for r in result.rejected] == [
        ("Answer the question. Be brief.", {"parent": 0.0, "child": 0.0})
    ]
    assert [c["sampling"] for c in reflection.calls] == [sampling] * 3
    assert "one short sentence to add" in reflection.calls[0]["messages"][0]["content"]
    assert result.before.reward_mean == 0.0 and result.after.reward_mean == 1.0
    assert result.rollouts_used <= config.budget


def test_parse_sentence_takes_the_first_line_unquoted() -> None:
    assert parse_sentence('\n  "Box the answer."\nMore text') == "Box the answer."
    assert parse_sentence("```\n```") is None
