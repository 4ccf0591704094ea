"""The vLLM wire's answers as ChatResponses (no server: the `/completions` body as vLLM sends
it): token ids and logprobs kept, a tool call parsed only when tools were offered."""

from __future__ import annotations

import pytest

from engines.vllm_client import TokenWire
from prime_env.errors import ModelError

TOOLS = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
CALL = '<tool_call>\n{"name": "add", "arguments": {"a": 1}}\n</tool_call>'


def body(text: str, finish: str | None = "stop") -> dict[str, object]:
    choice = {
        "text": text,
        "token_ids": [5, 6],
        "logprobs": {"token_logprobs": [-0.5, -0.25]},
        "finish_reason": finish,
    }
    return {"choices": [choice]}


def test_an_answer_keeps_its_ids_and_logprobs() -> None:
    wire = TokenWire("http://engine.test", tokenizer=None)
    reply = wire.response(body("hi", "length"), [1, 2, 3], None, "m")
    assert reply.message == {"role": "assistant", "content": "hi"}
    assert reply.finish_reason == "length" and reply.model == "m"
    assert (reply.prompt_token_ids, reply.completion_token_ids) == ([1, 2, 3], [5, 6])
    assert reply.completion_logprobs == [-0.5, -0.25]
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (3, 2)


def test_a_tool_call_is_parsed_only_when_tools_were_offered() -> None:
    wire = TokenWire("http://engine.test", tokenizer=None)
    called = wire.response(body(CALL), [1], TOOLS, "m")
    assert called.finish_reason == "tool_calls"
    (call,) = called.message["tool_calls"]
    assert call["function"] == {"name": "add", "arguments": '{"a": 1}'}
    assert call["id"].startswith("call_")
    plain = wire.response(body(CALL, None), [1], None, "m")
    assert plain.finish_reason == "stop" and plain.message["content"] == CALL


def test_an_answer_without_token_ids_is_a_model_error() -> None:
    wire = TokenWire("http://engine.test", tokenizer=None)
    with pytest.raises(ModelError, match="no token ids"):
        wire.response({"choices": [{"text": "hi"}]}, [1], None, "m")
