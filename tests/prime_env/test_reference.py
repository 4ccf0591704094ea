"""Reference policies: played through the environment's own harness, tools and rubric; text
tool calls parsed as a `local/` model's are; validation against the declared score."""

from __future__ import annotations

import json
from typing import Any

import pytest

from prime_env import (
    Environment,
    MultiTurn,
    Reference,
    ReferenceClient,
    Rubric,
    SingleTurn,
    State,
    Task,
    ToolLoop,
    run_rollouts,
)
from prime_env.chat_template import tool_call_text
from prime_env.clients.model_specs import resolve_model
from prime_env.errors import ModelConfigError
from prime_env.reference_check import validate_reference

TASKS = [
    Task(prompt=[{"role": "user", "content": f"What is {a} + {b}?"}], answer=str(a + b))
    for a, b in [(1, 2), (20, 22), (5, 5)]
]


def exact(completion: list[dict[str, Any]], answer: str) -> float:
    return 1.0 if (completion[-1].get("content") or "").strip() == answer else 0.0


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first
        b: the second
    """
    return a + b


def adding_solver(messages: list[dict[str, Any]], state: State) -> str:
    """Calls the tool in the local models' text form, then answers with its result."""
    if messages[-1]["role"] == "tool":
        return messages[-1]["content"]
    a, b = (int(x) for x in messages[-1]["content"][8:-1].split(" + "))
    return f"I will add them.{tool_call_text('add', {'a': a, 'b': b})}"


def tool_env(solve: Any = adding_solver, **declared: float) -> Environment:
    return Environment(
        TASKS,
        ToolLoop([add], max_turns=4),
        Rubric([exact]),
        name="t/adder",
        reference=Reference(solve, **(declared or {"min_reward": 1.0})),
    )


async def test_text_tool_calls_run_through_the_tool_loop_and_the_rubric() -> None:
    env = tool_env()
    records = await run_rollouts(env, ReferenceClient(env), r=1)
    assert [r.reward for r in records] == [1.0, 1.0, 1.0]
    first = records[0]
    assert first.model == "reference" and first.error is None
    call = first.completion[0]
    assert call["content"] == "I will add them."
    assert call["tool_calls"][0]["id"] == "call_0_0"  # deterministic: equal traces stay equal
    assert json.loads(call["tool_calls"][0]["function"]["arguments"]) == {"a": 1, "b": 2}
    assert first.completion[1] == {
        "role": "tool",
        "tool_call_id": "call_0_0",
        "name": "add",
        "content": "3",
    }
    assert first.tools is not None and first.tools[0]["function"]["name"] == "add"
    assert first.stop_reason == "completed" and first.usage.completion_tokens == 0


async def test_validate_passes_a_working_reference_and_fails_a_broken_one() -> None:
    report = await validate_reference(tool_env())
    assert report.passed and report.mean == 1.0 and report.lowest == 1.0 and not report.shortfalls

    def off_by_one(messages: list[dict[str, Any]], state: State) -> str:
        if messages[-1]["role"] == "tool":
            return str(int(messages[-1]["content"]) + (state.task.answer == "42"))
        return adding_solver(messages, state)

    broken = await validate_reference(tool_env(off_by_one))
    assert not broken.passed
    assert [(s.example_index, s.reward) for s in broken.shortfalls] == [(1, 0.0)]
    assert "reward 0 < min_reward 1" in broken.shortfalls[0].why

    mean = await validate_reference(tool_env(off_by_one, mean_reward=0.9))
    assert not mean.passed and mean.shortfalls[-1].task_id == "(all)"
    assert "mean reward 0.6667 < mean_reward 0.9" in mean.shortfalls[-1].why
    assert (await validate_reference(tool_env(off_by_one, mean_reward=0.6))).passed


async def test_a_reference_that_raises_is_an_error_and_fails_validation() -> None:
    def crashes(messages: list[dict[str, Any]], state: State) -> str:
        raise KeyError("solver bug")

    report = await validate_reference(tool_env(crashes))
    assert not report.passed and report.errors == 3 and report.mean is None
    assert "environment_error: KeyError" in report.shortfalls[0].why


async def test_multi_turn_reference_reads_the_environment_replies() -> None:
    def game(messages: list[dict[str, Any]], state: State) -> str:
        state.done = messages[-1]["content"] == state.task.answer
        return "yes" if state.done else "higher"

    async def bisect(messages: list[dict[str, Any]], state: State) -> dict[str, Any]:
        guesses = [int(m["content"]) for m in messages if m["role"] == "assistant"]
        return {"content": str(max(guesses, default=0) + 1)}

    env = Environment(
        [Task(prompt=[{"role": "user", "content": "guess"}], answer="3")],
        MultiTurn(game, max_turns=5),
        Rubric([lambda state: float(state.done)]),
        reference=Reference(bisect, min_reward=1.0),
    )
    [record] = await run_rollouts(env, ReferenceClient(env))
    assert [m["content"] for m in record.completion] == ["1", "higher", "2", "higher", "3", "yes"]
    assert record.reward == 1.0 and record.tools is None


def test_model_spec_reference_needs_the_environment() -> None:
    spec = resolve_model("reference")
    assert (spec.name, spec.client, spec.key_var) == ("reference", "reference", None)
    assert isinstance(spec.create_client(env=tool_env()), ReferenceClient)
    with pytest.raises(ModelConfigError, match="give env="):
        spec.create_client()
    bare = Environment(TASKS, SingleTurn(), Rubric([exact]), name="t/bare")
    with pytest.raises(ModelConfigError, match="t/bare ships no reference policy"):
        spec.create_client(env=bare)


def test_a_reference_must_declare_its_score() -> None:
    with pytest.raises(ValueError, match="pass min_reward="):
        Reference(adding_solver)
    with pytest.raises(ValueError, match="finite"):
        Reference(adding_solver, mean_reward=float("nan"))
    with pytest.raises(TypeError, match="must be a prime_env.Reference"):
        Environment(TASKS, SingleTurn(), Rubric([exact]), reference=adding_solver)  # type: ignore[arg-type]
