"""The OpenAI-compatible client against a real HTTP fake of the chat-completions API."""

from __future__ import annotations

import json
import time

import pytest

from prime_env.clients.base import SamplingArgs
from prime_env.clients.openai_client import OpenAIClient
from prime_env.clients.retry import AdaptiveLimiter, RetryPolicy
from prime_env.errors import ModelError
from testing.behaviour import token_id
from testing.server import FakeServer
from tests.prime_env.clients.conftest import API_KEY, FAST, hosted_client

ADD = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two numbers.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            },
        },
    }
]


def client(server: FakeServer, stream: bool = False, policy: RetryPolicy = FAST) -> OpenAIClient:
    return hosted_client(OpenAIClient, "fake-model", server, stream, policy)


@pytest.fixture(autouse=True)
def clean(openai_server: FakeServer) -> None:
    openai_server.configure(retry_after_s=0.05)


@pytest.mark.parametrize("stream", [False, True])
async def test_text_answer_and_usage(openai_server: FakeServer, stream: bool) -> None:
    c = client(openai_server, stream)
    resp = await c.chat(
        [{"role": "system", "content": "be terse"}, {"role": "user", "content": "say: hello there"}]
    )
    await c.aclose()
    assert resp.message == {"role": "assistant", "content": "hello there"}
    assert resp.finish_reason == "stop"
    assert resp.usage.completion_tokens == 2
    assert resp.usage.prompt_tokens == 5  # "be terse say: hello there"


@pytest.mark.parametrize("stream", [False, True])
async def test_tool_call_round_trip(openai_server: FakeServer, stream: bool) -> None:
    c = client(openai_server, stream)
    messages = [{"role": "user", "content": 'call: add {"a": 2, "b": 3}'}]
    first = await c.chat(messages, tools=ADD)
    assert first.finish_reason == "tool_calls"
    call = first.message["tool_calls"][0]
    assert call["type"] == "function" and call["function"]["name"] == "add"
    assert json.loads(call["function"]["arguments"]) == {"a": 2, "b": 3}
    messages += [first.message, {"role": "tool", "tool_call_id": call["id"], "content": "5"}]
    second = await c.chat(messages, tools=ADD)
    await c.aclose()
    assert second.message["content"] == "5" and second.finish_reason == "stop"


@pytest.mark.parametrize("stream", [False, True])
async def test_max_tokens_truncates(openai_server: FakeServer, stream: bool) -> None:
    c = client(openai_server, stream)
    resp = await c.chat(
        [{"role": "user", "content": "say: one two three four"}],
        sampling=SamplingArgs(max_tokens=2),
    )
    await c.aclose()
    assert resp.message["content"] == "one two" and resp.finish_reason == "length"


async def test_vllm_token_ids_and_logprobs(openai_server: FakeServer) -> None:
    c = client(openai_server)
    resp = await c.chat(
        [{"role": "user", "content": "say: a b c"}],
        sampling=SamplingArgs(logprobs=True, extra={"return_token_ids": True}),
    )
    assert resp.prompt_token_ids == [token_id(w) for w in ["say:", "a", "b", "c"]]
    assert resp.completion_token_ids == [token_id(w) for w in ["a", "b", "c"]]
    assert resp.completion_logprobs is not None and len(resp.completion_logprobs) == 3
    # return_tokens_as_token_ids spells ids inside the logprobs, streaming included
    c.stream = True
    streamed = await c.chat(
        [{"role": "user", "content": "say: a b c"}],
        sampling=SamplingArgs(logprobs=True, extra={"return_tokens_as_token_ids": True}),
    )
    await c.aclose()
    assert streamed.completion_token_ids == resp.completion_token_ids
    assert streamed.completion_logprobs == resp.completion_logprobs


FAULTS = ["429", "500", "503", "drop", "timeout", "malformed"]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("fault", FAULTS)
async def test_each_fault_is_retried(openai_server: FakeServer, fault: str, stream: bool) -> None:
    openai_server.configure(script=[fault, fault], retry_after_s=0.05)
    c = client(openai_server, stream)
    resp = await c.chat([{"role": "user", "content": "say: recovered"}])
    await c.aclose()
    assert resp.message["content"] == "recovered"
    stats = openai_server.stats()
    assert stats["requests"] == 3 and stats["injected"] == {fault: 2}


@pytest.mark.parametrize(
    ("fault", "error_type"),
    [
        ("429", "rate_limited"),
        ("500", "server_error"),
        ("drop", "connection_error"),
        ("timeout", "timeout"),
        ("malformed", "malformed_response"),
    ],
)
async def test_persistent_fault_becomes_model_error(
    openai_server: FakeServer, fault: str, error_type: str
) -> None:
    openai_server.configure(script=[fault] * 10, retry_after_s=0.01)
    c = client(openai_server, policy=RetryPolicy(max_attempts=3, base_delay_s=0.01, timeout_s=0.5))
    with pytest.raises(ModelError) as info:
        await c.chat([{"role": "user", "content": "say: never"}])
    await c.aclose()
    assert info.value.error_type == error_type
    assert "gave up after 3 attempts" in info.value.message
    assert openai_server.stats()["requests"] == 3


async def test_retry_after_is_honoured(openai_server: FakeServer) -> None:
    openai_server.configure(script=["429"], retry_after_s=0.4)
    c = client(openai_server)
    start = time.monotonic()
    await c.chat([{"role": "user", "content": "say: later"}])
    await c.aclose()
    assert time.monotonic() - start >= 0.4


async def test_bad_key_is_not_retried_and_never_echoed(openai_server: FakeServer) -> None:
    wrong = "sk-wrong-key-should-not-leak"
    c = OpenAIClient(
        "fake-model",
        base_url=openai_server.url,
        api_key=wrong,
        policy=FAST,
        limiter=AdaptiveLimiter(),
    )
    with pytest.raises(ModelError) as info:
        await c.chat([{"role": "user", "content": "say: x"}])
    await c.aclose()
    assert info.value.error_type == "authentication_error"
    assert openai_server.stats()["requests"] == 0  # refused before reaching the model
    assert wrong not in str(info.value)


async def test_total_time_is_bounded(openai_server: FakeServer) -> None:
    openai_server.configure(script=["timeout"] * 10)
    policy = RetryPolicy(max_attempts=10, base_delay_s=0.01, timeout_s=0.3, max_elapsed_s=0.8)
    c = client(openai_server, policy=policy)
    start = time.monotonic()
    with pytest.raises(ModelError) as info:
        await c.chat([{"role": "user", "content": "say: x"}])
    await c.aclose()
    assert info.value.error_type == "timeout"
    assert time.monotonic() - start < 1.5


async def test_rate_limits_shrink_the_endpoint_limit(openai_server: FakeServer) -> None:
    openai_server.configure(script=["429"] * 3, retry_after_s=0.02)
    limiter = AdaptiveLimiter(max_limit=64)
    c = OpenAIClient(
        "fake-model", base_url=openai_server.url, api_key=API_KEY, policy=FAST, limiter=limiter
    )
    await c.chat([{"role": "user", "content": "say: x"}])
    await c.aclose()
    assert limiter.rate_limited == 3
    assert limiter.limit < 64
