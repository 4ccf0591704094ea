"""Tools for `local/<name>` models: SmolLM2's plain ChatML template drops `tools`, so the
schemas go into the system prompt and tool results into `<tool_response>` turns; a template
that renders tools itself is left alone; tool calls parse in the object and list forms.
Tokenizer only: nothing here generates."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from prime_env.clients.base import SamplingArgs
from tests.trainer_bridge.conftest import smollm2_tokenizer_dir  # noqa: F401

POPULATION: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "population",
        "description": "Look up a city's population.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "the city's name"}},
            "required": ["city"],
        },
    },
}
QUESTION = {"role": "user", "content": "How many people live in Paris?"}
TOOL_RESULT = "The population of Paris is 2,102,650 (2023)."

# A Hermes-like template that writes the tools itself (and knows role `tool`).
TOOLS_TEMPLATE = (
    "{% if tools %}<|im_start|>system\nTOOLS:{% for t in tools %}{{ t | tojson }}{% endfor %}"
    "<|im_end|>\n{% endif %}"
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.fixture(scope="module")
def tokenizer(smollm2_tokenizer_dir: Path) -> Any:  # noqa: F811
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(smollm2_tokenizer_dir)


def rendered(tokenizer: Any, messages: list[dict[str, Any]], tools: Any) -> str:
    from prime_env.chat_template import prompt_ids

    return str(tokenizer.decode(prompt_ids(tokenizer, messages, tools)))


def test_smollm2_prompt_shows_the_tool_schemas(tokenizer: Any) -> None:
    from prime_env.chat_template import template_renders_tools

    assert not template_renders_tools(tokenizer)  # the GGUF's ChatML template drops them
    dropped = tokenizer.apply_chat_template([QUESTION], tools=[POPULATION], tokenize=False)
    assert "population" not in dropped

    system = {"role": "system", "content": "Answer briefly."}
    text = rendered(tokenizer, [system, QUESTION], [POPULATION])
    assert text.count("<|im_start|>system") == 1  # merged into the system message there
    head = text.split("<|im_end|>")[0]
    assert head.startswith("<|im_start|>system\nAnswer briefly.\n\n# Tools")
    assert f"<tools>\n{json.dumps(POPULATION)}\n</tools>" in head
    assert '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}' in head
    assert "How many people live in Paris?" in text and text.endswith("<|im_start|>assistant\n")

    alone = rendered(tokenizer, [QUESTION], [POPULATION])
    assert alone.startswith("<|im_start|>system\n# Tools") and "the city's name" in alone
    # without tools the prompt is what the template always rendered
    plain = tokenizer.apply_chat_template([QUESTION], tokenize=False, add_generation_prompt=True)
    assert rendered(tokenizer, [QUESTION], None) == plain and "<tools>" not in plain


def test_a_template_that_renders_tools_is_left_alone(smollm2_tokenizer_dir: Path) -> None:  # noqa: F811
    from transformers import AutoTokenizer

    from prime_env.chat_template import template_renders_tools

    tokenizer = AutoTokenizer.from_pretrained(smollm2_tokenizer_dir)
    tokenizer.chat_template = TOOLS_TEMPLATE
    assert template_renders_tools(tokenizer)
    messages = [QUESTION, {"role": "tool", "content": TOOL_RESULT}]
    text = rendered(tokenizer, messages, [POPULATION])
    assert text == tokenizer.apply_chat_template(
        messages, tools=[POPULATION], tokenize=False, add_generation_prompt=True
    )
    assert text.startswith("<|im_start|>system\nTOOLS:{") and "# Tools" not in text
    assert "<tool_response>" not in text


def test_tool_calls_parse_in_object_and_list_forms() -> None:
    from prime_env.chat_template import parse_tool_calls

    one = '<tool_call>{"name": "population", "arguments": {"city": "Paris"}}</tool_call>'
    assert parse_tool_calls(f"Let me look.{one}") == (
        [{"name": "population", "arguments": {"city": "Paris"}}],
        "Let me look.",
    )
    listed = (
        '<tool_call>[{"name": "population", "arguments": {"city": "Paris"}}, '
        '{"name": "population", "arguments": {"city": "Lyon"}}]</tool_call>'
    )
    calls, rest = parse_tool_calls(listed)
    assert [c["arguments"]["city"] for c in calls] == ["Paris", "Lyon"] and rest == ""
    # malformed blocks are no calls and stay in the text; a good one beside them still parses
    bad_json = "<tool_call>{name: population}</tool_call>"
    no_name = '<tool_call>[{"arguments": {}}]</tool_call>'
    calls, rest = parse_tool_calls(f"{bad_json} {no_name} {one}")
    assert calls == [{"name": "population", "arguments": {"city": "Paris"}}]
    assert rest == f"{bad_json} {no_name} "
    assert parse_tool_calls("<tool_call>[]</tool_call>") == ([], "<tool_call>[]</tool_call>")


def test_a_list_reply_becomes_several_tool_calls(tokenizer: Any) -> None:
    """The client's own reply path (decode, parse, OpenAI message) on SmolLM2's list form."""
    import asyncio

    from local_model.client import LocalClient, _Job

    client = LocalClient()
    client._tokenizer = tokenizer
    text = (
        '<tool_call>[{"name": "population", "arguments": {"city": "Paris"}}, '
        '{"name": "population", "arguments": {"city": "Lyon"}}]</tool_call>'
    )
    tokens = [*tokenizer(text, add_special_tokens=False).input_ids, tokenizer.eos_token_id]
    loop = asyncio.new_event_loop()
    try:
        job = _Job([QUESTION], [POPULATION], SamplingArgs(), loop.create_future())
        reply = client._response(job, [1], tokens, [-0.1] * len(tokens), 100)
        no_tools = _Job([QUESTION], None, SamplingArgs(), loop.create_future())
        plain = client._response(no_tools, [1], tokens, [-0.1] * len(tokens), 100)
    finally:
        loop.close()
    assert reply.finish_reason == "tool_calls" and reply.message["content"] is None
    calls = reply.message["tool_calls"]
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [
        {"city": "Paris"},
        {"city": "Lyon"},
    ]
    assert {c["function"]["name"] for c in calls} == {"population"}
    assert len({c["id"] for c in calls}) == 2
    assert reply.completion_token_ids == tokens  # the ids are what was sampled, unchanged
    assert plain.finish_reason == "stop" and plain.message["content"] == text


def test_a_tool_call_and_its_result_round_trip(tokenizer: Any) -> None:
    from prime_env.chat_template import parse_tool_calls

    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "population", "arguments": json.dumps({"city": "Paris"})},
    }
    messages = [
        QUESTION,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": TOOL_RESULT},
    ]
    text = rendered(tokenizer, messages, [POPULATION])
    assistant = text.split("<|im_start|>assistant\n")[1].split("<|im_end|>")[0]
    assert parse_tool_calls(assistant) == (
        [{"name": "population", "arguments": {"city": "Paris"}}],
        "",
    )
    assert f"<|im_start|>tool\n<tool_response>\n{TOOL_RESULT}\n</tool_response><|im_end|>" in text
    assert text.index("<tools>") < text.index("<tool_call>") < text.index("<tool_response>")
    assert text.endswith("<|im_start|>assistant\n")
