"""Rollout records → SFT samples: which records are kept, the two chat forms, and token ids that
are exactly the local model's prompts with a mask on the assistant turns only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from prime_env import Environment, Reference, ReferenceClient, Rubric, State, ToolLoop, run_rollouts
from prime_env.chat_template import prompt_ids, tool_call_text
from prime_env.record import RolloutRecord
from prime_env.sft import (
    RenderError,
    chat_samples,
    select_records,
    token_sample,
    transcript_key,
)
from tests.trainer_bridge.conftest import smollm2_tokenizer_dir  # noqa: F401


def population(city: str) -> str:
    """Look up a city's population.

    Args:
        city: the city's name
    """
    return f"The population of {city} is 2,102,650."


def lookup(messages: list[dict[str, Any]], state: State) -> str:
    if messages[-1]["role"] == "tool":
        return "About 2.1 million."
    return tool_call_text("population", {"city": "Paris"})


def looked_up(completion: list[dict[str, Any]]) -> float:
    return float(any(m["role"] == "tool" for m in completion))


@pytest.fixture(scope="module")
def tool_record() -> RolloutRecord:
    env = Environment(
        [{"question": "How many people live in Paris?", "id": "paris"}],
        ToolLoop([population], max_turns=3, system_prompt="Be brief."),
        Rubric([looked_up]),
        name="t/pop",
        reference=Reference(lookup, min_reward=1.0),
    )
    import asyncio

    [record] = asyncio.run(run_rollouts(env, ReferenceClient(env)))
    return record


def record(task: str, rollout: int, reward: float | None, text: str, **extra: Any) -> RolloutRecord:
    return RolloutRecord(
        run_id="r",
        env="t/env@1",
        task_id=task,
        example_index=int(task[1:]),
        rollout_index=rollout,
        model="m",
        prompt=[{"role": "user", "content": task}],
        completion=[{"role": "assistant", "content": text}],
        reward=reward,
        error={"type": "timeout", "message": "x"} if reward is None else None,
        **extra,
    )


def test_selection_drops_errors_low_rewards_repeats_and_keeps_the_best_of_each_task() -> None:
    records = [
        record("t0", 0, 0.2, "a"),
        record("t0", 1, 0.9, "b"),
        record("t0", 2, 0.9, "b"),  # same transcript as rollout 1
        record("t0", 3, 0.7, "c"),
        record("t1", 0, None, ""),  # an outage is no example
        record("t1", 1, 0.5, "d"),
        record("t1", 2, 1.0, "e"),
    ]
    everything = select_records(records, dedup=False)
    assert (len(everything.kept), everything.errors) == (6, 1)
    chosen = select_records(records, min_reward=0.5, best_of=2)
    assert [(r.task_id, r.rollout_index) for r in chosen.kept] == [
        ("t0", 1),
        ("t0", 3),
        ("t1", 1),
        ("t1", 2),
    ]
    assert (chosen.read, chosen.errors, chosen.below_min_reward) == (7, 1, 1)
    assert (chosen.duplicates, chosen.beyond_best_of) == (1, 0)
    best = select_records(records, best_of=1)
    assert [(r.task_id, r.rollout_index) for r in best.kept] == [("t0", 1), ("t1", 2)]
    assert best.beyond_best_of == 3
    with pytest.raises(ValueError, match="best_of must be at least 1"):
        select_records(records, best_of=0)


def test_transcripts_that_differ_only_in_random_tool_call_ids_are_one_example(
    tool_record: RolloutRecord,
) -> None:
    renamed = json.loads(tool_record.to_json().replace("call_0_0", "call_x7Q"))
    again = RolloutRecord.model_validate({**renamed, "rollout_index": 1})
    assert transcript_key(again) == transcript_key(tool_record)
    other = json.loads(tool_record.to_json().replace("2,102,650", "2,102,651"))
    assert transcript_key(RolloutRecord.model_validate(other)) != transcript_key(tool_record)


def test_openai_form_keeps_tool_calls_and_the_schemas(tool_record: RolloutRecord) -> None:
    [sample] = chat_samples(tool_record)
    roles = [m["role"] for m in sample["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    call = sample["messages"][2]
    assert call["content"] == "" and call["tool_calls"][0]["function"]["name"] == "population"
    assert sample["messages"][3]["tool_call_id"] == call["tool_calls"][0]["id"]
    assert json.loads(sample["tools"])[0]["function"]["name"] == "population"


def test_text_form_is_what_a_local_model_is_shown(tool_record: RolloutRecord) -> None:
    [sample] = chat_samples(tool_record, "text")
    messages = sample["messages"]
    assert "tools" not in sample
    assert all(set(m) == {"role", "content"} for m in messages)
    assert messages[0]["content"].startswith("Be brief.\n\n# Tools")
    assert '"name": "population"' in messages[0]["content"]
    assert messages[2]["content"] == tool_call_text("population", {"city": "Paris"})
    assert messages[3]["content"].startswith("<tool_response>\nThe population of Paris")


def test_tokens_are_the_local_models_prompts_and_the_mask_is_its_turns(
    tool_record: RolloutRecord,
    smollm2_tokenizer_dir: Path,  # noqa: F811
) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(smollm2_tokenizer_dir)
    messages = chat_samples(tool_record)[0]["messages"]
    sample = token_sample(tokenizer, messages, tool_record.tools)
    assert len(sample.input_ids) == len(sample.loss_mask) and sample.loss_mask[0] == 0
    for turn in (2, 4):  # what the model was prompted with before each of its turns
        prompt = prompt_ids(tokenizer, messages[:turn], tool_record.tools)
        assert sample.input_ids[: len(prompt)] == prompt
        assert not any(sample.loss_mask[: len(prompt)][-3:])  # the header is not trained
    trained = [t for t, m in zip(sample.input_ids, sample.loss_mask) if m]
    eos = tokenizer.eos_token
    assert tokenizer.decode(trained) == (
        tool_call_text("population", {"city": "Paris"}) + eos + "About 2.1 million." + eos
    )


def test_a_template_that_rewrites_earlier_turns_cannot_be_marked(
    tool_record: RolloutRecord,
    smollm2_tokenizer_dir: Path,  # noqa: F811
) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(smollm2_tokenizer_dir)
    # Like templates that drop earlier turns' reasoning: only the last assistant turn is shown.
    tokenizer.chat_template = (
        "{% for m in messages %}{% if m['role'] != 'assistant' or loop.last %}"
        "<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    with pytest.raises(RenderError, match="renders this conversation's earlier turns differently"):
        token_sample(tokenizer, chat_samples(tool_record)[0]["messages"], tool_record.tools)


def test_a_branching_trace_is_one_chat_per_branch() -> None:
    """An agent program that spawned a subagent: its record's messages are a tree (the
    subagent's chat a root of its own); each branch is a chat of its own, the caller's chat
    never showing the subagent's messages (as training takes one sample per branch)."""
    m = [
        {"role": "system", "content": "You are the main agent."},
        {"role": "user", "content": "Task"},
        {"role": "assistant", "content": "Asking a helper."},
        {"role": "system", "content": "You are a helper."},
        {"role": "user", "content": "Subtask"},
        {"role": "assistant", "content": "Sub answer"},
        {"role": "user", "content": "The helper said: Sub answer"},
        {"role": "assistant", "content": "Final answer"},
    ]
    calls = [
        {"request": 1, "reply": 2, "parent": None},
        {"request": 4, "reply": 5, "parent": None},
        {"request": 6, "reply": 7, "parent": 0},
    ]
    trace = {"parents": [None, 0, 1, None, 3, 4, 2, 6], "calls": calls}

    def rollout(completion: list[dict[str, Any]], **extra: Any) -> RolloutRecord:
        return RolloutRecord(
            run_id="r", env="t/env@1", task_id="t0", example_index=0, rollout_index=0,
            model="m", prompt=m[:2], completion=completion, reward=1.0, **extra,
        )  # fmt: skip

    branching = rollout(m[2:], trace=trace)
    chats = [[x["content"] for x in s["messages"]] for s in chat_samples(branching)]
    assert chats == [
        ["You are a helper.", "Subtask", "Sub answer"],
        ["You are the main agent.", "Task", "Asking a helper.", m[6]["content"], "Final answer"],
    ]
    # one chain of calls (a linear rollout, or a simulated user's trace) stays one chat, whole
    linear = rollout([m[2], m[6], m[7]])
    assert [len(s["messages"]) for s in chat_samples(linear)] == [5]


def test_rollouts_scored_zero_are_left_out_when_asked() -> None:
    records = [record("t0", 0, 0.0, "a"), record("t0", 1, 1.0, "b"), record("t1", 0, 0.0, "c")]
    kept = select_records(records, zero_reward=False)
    assert [r.rollout_index for r in kept.kept] == [1] and kept.zero_reward == 2
    assert len(select_records(records).kept) == 3  # the library's default keeps them
