"""SimulatedUser and Conversation: a script or a model plays the user, its stop marker and turn
limit end the dialogue, its messages are marked and its model's tokens are not the rollout's."""

from __future__ import annotations

import pytest

from prime_env import (
    Conversation,
    Environment,
    ModelError,
    Rubric,
    SimulatedUser,
    run_rollouts,
)

from .scripted import ScriptedClient

TASKS = [{"question": "Hi, my parcel is late.", "answer": "refund", "info": {"order": "1234"}}]


def env_with(user: SimulatedUser, max_turns: int = 10) -> Environment:
    return Environment(
        TASKS, Conversation(user, system_prompt="You are support.", max_turns=max_turns),
        Rubric([lambda completion: 1.0]),
    )  # fmt: skip


async def test_a_script_ends_with_its_stop_marker_and_its_turns_are_marked() -> None:
    def script(messages, state):
        assert messages[-1]["role"] == "assistant" and state.task.answer == "refund"
        return "Thanks, bye. ###DONE###" if "refund" in messages[-1]["content"] else "Order 1234."

    model = ScriptedClient(["Which order?", "I will refund order 1234."])
    [record] = await run_rollouts(env_with(SimulatedUser(script=script)), model)
    assert record.error is None and record.stop_reason == "env_done"
    assert [m["role"] for m in record.completion] == ["assistant", "user", "assistant", "user"]
    assert record.completion[-1]["content"] == "Thanks, bye."  # the marker is cut
    first = len(record.prompt)
    assert record.trace is not None and record.trace.simulated == [first + 1, first + 3]
    # the model saw the user's turns as user messages, not its own
    assert model.calls[1]["messages"][-1] == {"role": "user", "content": "Order 1234."}


async def test_the_users_turn_limit_ends_the_dialogue() -> None:
    user = SimulatedUser(script=lambda messages, state: "Go on.", max_turns=2)
    [record] = await run_rollouts(env_with(user), ScriptedClient(lambda m, t: "Hello."))
    assert record.stop_reason == "env_done"
    assert [m["role"] for m in record.completion] == ["assistant", "user"] * 2


async def test_a_model_plays_the_user_from_its_own_prompt_and_side() -> None:
    user_model = ScriptedClient(["Order 1234, please hurry.", "Great. <<end>>"])
    user = SimulatedUser(
        user_model, prompt="You want a {answer} for order {order}.", stop="<<end>>"
    )
    [record] = await run_rollouts(env_with(user), ScriptedClient(["Which order?", "Refunded."]))
    assert record.stop_reason == "env_done" and record.completion[-1]["content"] == "Great."
    first, second = (call["messages"] for call in user_model.calls)
    assert first[0] == {"role": "system", "content": "You want a refund for order 1234."}
    # its side: the model's turns are what it is told, its own turns are its replies
    assert [m["role"] for m in second[1:]] == ["user", "assistant", "user", "assistant", "user"]
    assert second[-1] == {"role": "user", "content": "Refunded."}
    # the user model's tokens (10 + 5 a call in ScriptedClient) are not the rollout's
    assert record.usage.prompt_tokens == 20 and record.usage.completion_tokens == 10


async def test_a_failing_user_model_is_an_error_record_not_a_zero() -> None:
    user = SimulatedUser(ScriptedClient([ModelError("provider_unavailable", "provider down")]))
    [record] = await run_rollouts(env_with(user), ScriptedClient(["Hello."]))
    assert record.reward is None and record.error is not None
    assert "provider down" in record.error.message


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="exactly one of model= or script="):
        SimulatedUser()
    with pytest.raises(ValueError, match="exactly one of model= or script="):
        SimulatedUser("openai/gpt-4.1-mini", script=lambda m, s: "hi")
    with pytest.raises(ValueError, match="max_turns must be at least 1"):
        SimulatedUser(script=lambda m, s: "hi", max_turns=0)
