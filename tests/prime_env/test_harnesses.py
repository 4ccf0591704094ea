"""SingleTurn and MultiTurn harnesses and every stop reason."""

from __future__ import annotations

import asyncio

import pytest

from prime_env import ChatResponse, MultiTurn, SingleTurn, Task, ToolLoop, Usage

from .scripted import ScriptedClient, tool_call

TASK = Task(prompt=[{"role": "user", "content": "guess a number"}], answer="7")


async def test_single_turn_system_prompt_and_length() -> None:
    client = ScriptedClient(
        [ChatResponse({"role": "assistant", "content": "cut"}, "length", Usage(3, 9))]
    )
    state = await SingleTurn("You are terse.").rollout(client, TASK)
    assert client.calls[0]["messages"][0] == {"role": "system", "content": "You are terse."}
    assert state.stop_reason == "length"
    assert state["usage"] == {"prompt_tokens": 3, "completion_tokens": 9}


async def test_system_prompt_not_duplicated_when_task_has_one() -> None:
    task = Task(prompt=[{"role": "system", "content": "own"}, {"role": "user", "content": "q"}])
    client = ScriptedClient(["a"])
    await SingleTurn("harness").rollout(client, task)
    assert [m["content"] for m in client.calls[0]["messages"]] == ["own", "q"]


def guess_game(messages, state):
    guess = messages[-1]["content"].strip()
    state["guesses"] = state.get("guesses", 0) + 1
    if guess == state.task.answer:
        state.done = True
        return "correct!"
    return "higher" if int(guess) < 7 else "lower"


async def test_multi_turn_env_ends_episode_and_sees_last_turn() -> None:
    client = ScriptedClient(["3", "9", "7", "1"])
    state = await MultiTurn(guess_game, max_turns=10).rollout(client, TASK)
    assert state.stop_reason == "env_done"
    assert state["guesses"] == 3 and state.num_turns == 3
    assert [m["content"] for m in state.completion] == [
        "3",
        "higher",
        "9",
        "lower",
        "7",
        "correct!",
    ]
    assert client.calls[2]["messages"][-1] == {"role": "user", "content": "lower"}


async def test_multi_turn_max_turns_async_env_response() -> None:
    async def always_wrong(messages, state):
        await asyncio.sleep(0)
        return [{"role": "user", "content": "wrong"}]

    state = await MultiTurn(always_wrong, max_turns=2).rollout(
        ScriptedClient(lambda m, t: "1"), TASK
    )
    assert state.stop_reason == "max_turns" and state.num_turns == 2
    assert state.completion[-1]["content"] == "wrong"  # the env answered the last turn too


async def test_token_budget_stops_and_caps_max_tokens() -> None:
    client = ScriptedClient(lambda m, t: "1")  # 5 completion tokens per call
    state = await MultiTurn(lambda m, s: "again", max_turns=50, max_tokens_total=12).rollout(
        client, TASK
    )
    assert state.stop_reason == "token_budget"
    assert state.num_turns == 3
    assert [c["sampling"].max_tokens for c in client.calls] == [12, 7, 2]


async def test_timeout_is_a_stop_reason_and_keeps_partial_work() -> None:
    client = ScriptedClient(lambda m, t: "1", delay=0.05)
    state = await MultiTurn(lambda m, s: "more", max_turns=1000, timeout=0.3).rollout(client, TASK)
    assert state.stop_reason == "timeout"
    assert 1 <= state.num_turns < 1000


@pytest.mark.parametrize("timeout", [None, 30.0])
async def test_a_timeout_inside_the_episode_is_its_error_not_the_episodes_timeout(timeout) -> None:
    """Only the harness's own deadline is stop reason `timeout`; a TimeoutError raised by what
    the episode calls (an env step's own wait) fails the rollout like any other exception."""

    async def env_step(messages, state):
        raise TimeoutError("the env's service did not answer")

    harness = MultiTurn(env_step, max_turns=3, timeout=timeout)
    with pytest.raises(TimeoutError, match="did not answer"):
        await harness.rollout(ScriptedClient(["1"]), TASK)


async def test_tool_loop_length_stop() -> None:
    client = ScriptedClient(
        [
            {"role": "assistant", "content": None, "tool_calls": [tool_call("noop", "{}")]},
            ChatResponse({"role": "assistant", "content": "trunc"}, "length", Usage(1, 1)),
        ]
    )

    def noop() -> str:
        """Do nothing."""
        return ""

    state = await ToolLoop([noop]).rollout(client, TASK)
    assert state.stop_reason == "length"
