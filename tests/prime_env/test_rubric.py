"""Rubric argument injection, weights, metrics, group rewards and the judge rubric."""

from __future__ import annotations

import threading

import pytest

from prime_env import (
    ChatResponse,
    Environment,
    JudgeRubric,
    ModelError,
    Rubric,
    RubricError,
    SingleTurn,
    Usage,
    XMLParser,
    run_rollouts,
    summarize,
)

from .scripted import ScriptedClient


def test_unknown_argument_is_rejected_at_declaration() -> None:
    def reward(completion, anwser):
        return 1.0

    with pytest.raises(RubricError, match=r"asks for argument 'anwser'.*available: \['answer'"):
        Rubric([reward])


def test_parser_must_be_given_when_asked_for() -> None:
    def reward(completion, parser):
        return 1.0

    with pytest.raises(RubricError, match="'parser'"):
        Rubric([reward])
    Rubric([reward], parser=XMLParser())


def test_mixed_group_and_single_arguments_rejected() -> None:
    with pytest.raises(RubricError, match="mixes"):
        Rubric([lambda completion, completions: 1.0])


def test_weights_length_checked() -> None:
    with pytest.raises(RubricError, match="2 reward functions but 1 weights"):
        Rubric([lambda completion: 1.0, lambda answer: 1.0], [1.0])


async def test_weights_metrics_injection_sync_and_async() -> None:
    threads: list[str] = []
    parser = XMLParser(["answer"])

    def correct(completion, answer, parser, state):
        threads.append(threading.current_thread().name)
        state["parsed"] = parser.parse_answer(completion)
        return state["parsed"] == answer

    async def uses_cache(state, info):
        return 1.0 if state["parsed"] is not None and info["level"] == 2 else 0.0

    def length(completion):
        return len(completion[-1]["content"])

    rubric = Rubric(
        [correct, uses_cache], [1.0, 0.5], metrics=[length, parser.format_reward], parser=parser
    )
    env = Environment([{"question": "q", "answer": "4", "level": 2}], SingleTurn(), rubric)
    [rec] = await run_rollouts(env, ScriptedClient(["<answer>4</answer>"]))
    assert rec.rewards == {"correct": 1.0, "uses_cache": 1.0}
    assert rec.reward == 1.5
    assert rec.metrics == {"length": 18.0, "format_reward": 1.0}
    assert threads and threads[0] != threading.main_thread().name


async def test_group_rewards_see_the_whole_group() -> None:
    def correct(completion, answer):
        return completion[-1]["content"].strip() == answer

    def shortest_correct_bonus(completions, answers):
        lengths = [
            len(c[-1]["content"]) if c[-1]["content"].strip() == a else None
            for c, a in zip(completions, answers)
        ]
        best = min((x for x in lengths if x is not None), default=None)
        return [1.0 if x is not None and x == best else 0.0 for x in lengths]

    replies = iter(["4", " 4 ", "5", "4  "])
    env = Environment(
        [{"question": "2+2", "answer": "4"}],
        SingleTurn(),
        Rubric([correct, shortest_correct_bonus], [1.0, 0.5]),
    )
    emitted = []
    records = await run_rollouts(
        env,
        ScriptedClient(lambda m, t: next(replies)),
        r=4,
        concurrency=1,
        on_record=emitted.append,
    )
    assert [r.rewards["shortest_correct_bonus"] for r in records] == [1.0, 0.0, 0.0, 0.0]
    assert [r.reward for r in records] == [1.5, 1.0, 0.0, 1.0]
    assert len(emitted) == 4


async def test_group_reward_excludes_error_rollouts() -> None:
    sizes = []

    def group(completions):
        sizes.append(len(completions))
        return [1.0] * len(completions)

    replies = iter(["a", ModelError("server_error", "boom"), "b"])
    env = Environment([{"question": "q"}], SingleTurn(), Rubric([group]))
    records = await run_rollouts(
        env, ScriptedClient(lambda m, t: next(replies)), r=3, concurrency=1
    )
    assert sizes == [2]
    assert [r.reward for r in records] == [1.0, None, 1.0]


async def test_reward_function_returning_garbage_is_a_scoring_error() -> None:
    env = Environment([{"question": "q"}], SingleTurn(), Rubric([lambda completion: "yes"]))
    [rec] = await run_rollouts(env, ScriptedClient(["x"]))
    assert rec.reward is None and rec.error.type == "scoring_error"
    assert "must return a finite number" in rec.error.message


def _judge_reply(text):
    return ChatResponse({"role": "assistant", "content": text}, "stop", Usage(1, 1))


async def test_judge_rubric_yes_no_and_custom_question() -> None:
    judge_calls = []

    def judge_fn(messages, tools):
        judge_calls.append(messages[0]["content"])
        text = messages[0]["content"]
        return _judge_reply("Yes." if "Paris" in text.split("Model's response:")[1] else "no")

    judge = ScriptedClient(judge_fn)

    async def polite(judge, prompt, completion, answer):
        return await judge("Is the response polite?", prompt, completion, answer)

    rubric = JudgeRubric(
        judge, {"correct": "Does the response give the reference answer?"}, funcs=[polite]
    )
    env = Environment(
        [
            {"question": "Capital of France?", "answer": "Paris"},
            {"question": "Capital of Spain?", "answer": "Madrid"},
        ],
        SingleTurn(),
        rubric,
    )
    records = await run_rollouts(env, ScriptedClient(lambda m, t: "Paris"), concurrency=2)
    assert [r.rewards for r in records] == [{"correct": 1.0, "polite": 1.0}] * 2
    assert any("Reference answer (may be empty):\nMadrid" in c for c in judge_calls)
    assert any("Question: Is the response polite?" in c for c in judge_calls)


async def test_unreadable_judge_or_judge_outage_is_an_error_not_zero() -> None:
    for reply, expected in [
        (_judge_reply("maybe"), "judge_unparseable"),
        (ModelError("rate_limit", "429"), "rate_limit"),
    ]:
        rubric = JudgeRubric(ScriptedClient([reply]), ["Is it right?"])
        env = Environment([{"question": "q", "answer": "a"}], SingleTurn(), rubric)
        [rec] = await run_rollouts(env, ScriptedClient(["a"]))
        assert rec.reward is None and rec.error.type == expected
        assert summarize([rec]).reward_mean is None
