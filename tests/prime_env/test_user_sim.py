"""SimulatedUser and Conversation: a script or a model plays the user, its stop marker and turn
limit end the dialogue, its messages are marked and its model's tokens are not the rollout's."""

from __future__ import annotations

from pathlib import Path

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


async def test_a_priced_user_models_tokens_and_cost_count_in_the_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A user played by `openai/gpt-4.1-mini` (on a fake server speaking OpenAI's wire format):
    its tokens and their cost are on the record's `user_usage` and in the summary, never in the
    policy's usage; a summary merged from stored partials keeps them."""
    from registry_index.summary import SummaryBuilder, summarize
    from testing.server import FakeServer

    with FakeServer("openai") as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        server.script_replies(["Order 1234. ###DONE###"])
        user = SimulatedUser("openai/gpt-4.1-mini", max_turns=1)
        [record] = await run_rollouts(env_with(user), ScriptedClient(["Which order?"]))
    assert record.error is None and record.usage.prompt_tokens == 10  # the policy's only
    used = record.user_usage
    assert used is not None and used.prompt_tokens > 0 and used.completion_tokens > 0
    price = (used.prompt_tokens * 0.40 + used.completion_tokens * 1.60) / 1e6
    assert used.cost_usd == pytest.approx(price)
    summary = summarize([record])
    assert (summary.user_prompt_tokens, summary.user_completion_tokens) == (
        used.prompt_tokens,
        used.completion_tokens,
    )
    assert summary.user_cost_usd == pytest.approx(price)
    builder = SummaryBuilder()
    builder.add(record)
    merged = SummaryBuilder()
    merged.merge(builder.partial())
    merged.merge({**builder.partial(), "user_tokens": None, "user_cost": None})  # an old one
    assert merged.summary().user_cost_usd == pytest.approx(price)
    # a user model with no known price makes the run's user cost unknown, never 0
    record.user_usage = used.model_copy(update={"cost_usd": None})
    assert summarize([record]).user_cost_usd is None


def test_the_runs_cost_adds_the_user_models(tmp_path: Path) -> None:
    from prime_env.clients.model_specs import resolve_model
    from prime_env.eval_run_dir import EvalRunDir, RunConfig
    from prime_env.evaluation import EvalRun
    from registry_index.summary import Summary

    spec = resolve_model("openai/gpt-4.1-mini")
    config = RunConfig(env="e", env_version=None, env_args={}, model=spec.name, base_url=None,
                       n=1, r=1, sampling={})  # fmt: skip
    run = EvalRun(
        EvalRunDir(tmp_path), "r", config, spec, env_with(SimulatedUser(script=print)), ""
    )
    policy = Summary(prompt_tokens=1_000_000, completion_tokens=0)
    assert run.cost(policy) == pytest.approx(0.40)
    with_user = policy.model_copy(update={"user_prompt_tokens": 5, "user_cost_usd": 1.25})
    assert run.cost(with_user) == pytest.approx(1.65)
    unknown = policy.model_copy(update={"user_prompt_tokens": 5, "user_cost_usd": None})
    assert run.cost(unknown) is None
