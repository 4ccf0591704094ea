"""The Anthropic client against a real HTTP fake of the Messages API, and its conversions."""

from __future__ import annotations

import json

import pytest

from prime_env.clients.anthropic_client import AnthropicClient, to_anthropic
from prime_env.clients.base import SamplingArgs
from prime_env.clients.retry import RetryPolicy
from prime_env.errors import ModelError
from testing.server import FakeServer
from tests.prime_env.clients.conftest import API_KEY, FAST, hosted_client

ADD = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add.",
            "parameters": {"type": "object", "properties": {}},
        },
    }
]


def client(server: FakeServer, stream: bool = False, policy: RetryPolicy = FAST) -> AnthropicClient:
    return hosted_client(AnthropicClient, "claude-test", server, stream, policy)


@pytest.fixture(autouse=True)
def clean(anthropic_server: FakeServer) -> None:
    anthropic_server.configure(retry_after_s=0.05)


def test_conversion_merges_turns_and_maps_tools() -> None:
    system, turns = to_anthropic(
        [
            {"role": "system", "content": "rules"},
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": "calling",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "add", "arguments": '{"a": 1}'},
                    },
                    {
                        "id": "c2",
                        "type": "function",
                        "function": {"name": "add", "arguments": '{"a": 2}'},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "1"},
            {"role": "tool", "tool_call_id": "c2", "content": "2"},
            {"role": "user", "content": [{"type": "text", "text": "and?"}]},
        ]
    )
    assert system == "rules"
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]  # strict alternation
    assert turns[1]["content"][1] == {
        "type": "tool_use",
        "id": "c1",
        "name": "add",
        "input": {"a": 1},
    }
    assert [b["type"] for b in turns[2]["content"]] == ["tool_result", "tool_result", "text"]
    assert turns[2]["content"][1]["tool_use_id"] == "c2"


@pytest.mark.parametrize("stream", [False, True])
async def test_text_and_usage(anthropic_server: FakeServer, stream: bool) -> None:
    c = client(anthropic_server, stream)
    resp = await c.chat(
        [{"role": "system", "content": "terse"}, {"role": "user", "content": "say: hi you"}],
        sampling=SamplingArgs(max_tokens=50, temperature=0.0),
    )
    await c.aclose()
    assert resp.message == {"role": "assistant", "content": "hi you"}
    assert resp.finish_reason == "stop"
    assert (resp.usage.prompt_tokens, resp.usage.completion_tokens) == (3, 2)


@pytest.mark.parametrize("stream", [False, True])
async def test_tool_use_round_trip(anthropic_server: FakeServer, stream: bool) -> None:
    c = client(anthropic_server, stream)
    messages = [{"role": "user", "content": 'call: add {"a": 4}'}]
    first = await c.chat(messages, tools=ADD)
    assert first.finish_reason == "tool_calls"
    call = first.message["tool_calls"][0]
    assert call["function"]["name"] == "add" and json.loads(call["function"]["arguments"]) == {
        "a": 4
    }
    messages += [first.message, {"role": "tool", "tool_call_id": call["id"], "content": "four"}]
    second = await c.chat(messages, tools=ADD)
    await c.aclose()
    assert second.message["content"] == "four"


async def test_max_tokens_maps_to_length(anthropic_server: FakeServer) -> None:
    c = client(anthropic_server)
    resp = await c.chat(
        [{"role": "user", "content": "say: a b c d"}], sampling=SamplingArgs(max_tokens=2)
    )
    await c.aclose()
    assert resp.finish_reason == "length" and resp.message["content"] == "a b"


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("fault", ["429", "500", "503", "drop", "timeout", "malformed"])
async def test_each_fault_is_retried(
    anthropic_server: FakeServer, fault: str, stream: bool
) -> None:
    anthropic_server.configure(script=[fault], retry_after_s=0.05)
    c = client(anthropic_server, stream)
    resp = await c.chat([{"role": "user", "content": "say: fine"}])
    await c.aclose()
    assert resp.message["content"] == "fine"
    stats = anthropic_server.stats()
    assert (stats["requests"], stats["injected"]) == (2, {fault: 1})


async def test_exhausted_retries_raise_model_error(anthropic_server: FakeServer) -> None:
    anthropic_server.configure(script=["503"] * 5)
    c = client(anthropic_server, policy=RetryPolicy(max_attempts=2, base_delay_s=0.01))
    with pytest.raises(ModelError) as info:
        await c.chat([{"role": "user", "content": "say: x"}])
    await c.aclose()
    assert info.value.error_type == "server_error"
    assert API_KEY not in str(info.value)
