"""Three unchanged agent programs in sandboxes, through the interception server, against the
fake OpenAI and the fake Anthropic servers: a Responses-API agent (also stateful, streaming),
an Anthropic-SDK agent that streams, and a Chat Completions agent with its own system prompt
that spawns a subagent. The stored transcript is what each program sent and received, every
message once, and the trace graph tells each call's request and its branch."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from prime_env import Rubric, State, run_rollouts
from prime_env.clients.anthropic_client import AnthropicClient
from prime_env.clients.openai_client import OpenAIClient
from prime_env.record import RolloutRecord
from prime_env.sft import chat_samples
from prime_env.trace_graph import message_key, path_messages
from testing.server import FakeServer

from .agents import agent_env

pytestmark = pytest.mark.xdist_group("agents")  # the fake servers are shared by the module

Neutral = tuple[Any, ...]


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, FakeServer]]:
    with FakeServer("openai") as openai_server, FakeServer("anthropic") as anthropic_server:
        yield {"openai": openai_server, "anthropic": anthropic_server}


def client_for(server: FakeServer) -> Any:
    if server.provider == "openai":
        return OpenAIClient("fake", base_url=server.url, api_key="k")
    return AnthropicClient("fake", base_url=server.url, api_key="k", stream=True)


async def run(agent: str, server: FakeServer, args: str = "") -> list[tuple[RolloutRecord, State]]:
    env = agent_env.load_environment(agent, args=args, num_tasks=3)
    states: list[State] = []

    def keep(state: State, answer: str) -> float:
        states.append(state)
        return agent_env.correct(state, answer)

    env.rubric = Rubric([keep])
    client = client_for(server)
    try:
        records = await run_rollouts(env, client, n=3, concurrency=3)
    finally:
        await client.aclose()
    by_task = {s.task.id: s for s in states}
    return [(r, by_task[r.task_id]) for r in records]


# -- each API's messages in one neutral form, read independently of the server's converters --


def _args(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def from_chat(messages: list[dict[str, Any]]) -> list[Neutral]:
    out: list[Neutral] = []
    for m in messages:
        content = m.get("content") or ""
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content)
        if m["role"] == "tool":
            out.append(("tool", m["tool_call_id"], content))
        elif m["role"] == "assistant":
            calls = tuple(
                (c["id"], c["function"]["name"], _args(c["function"]["arguments"]))
                for c in m.get("tool_calls") or []
            )
            out.append(("assistant", content, calls))
        else:
            out.append((m["role"], content))
    return out


def from_responses_items(items: list[dict[str, Any]]) -> list[Neutral]:
    out: list[Neutral] = []
    for item in items:
        kind = item.get("type", "message")
        if kind == "message":
            content = item["content"]
            text = content if isinstance(content, str) else "".join(c["text"] for c in content)
            if item["role"] == "assistant":
                out.append(("assistant", text, ()))
            else:
                out.append((item["role"], text))
        elif kind == "function_call":
            call = (item["call_id"], item["name"], _args(item["arguments"]))
            if out and out[-1][0] == "assistant":
                out[-1] = ("assistant", out[-1][1], (*out[-1][2], call))
            else:
                out.append(("assistant", "", (call,)))
        elif kind == "function_call_output":
            out.append(("tool", item["call_id"], item["output"]))
    return out


def responses_calls(log: list[dict[str, Any]]) -> list[tuple[list[Neutral], Neutral]]:
    """(full request, reply) per call; a stateful request is its previous one's conversation
    plus its new items, under its own instructions."""
    calls = []
    conversation: list[Neutral] = []
    for entry in log:
        request, response = entry["request"], entry["response"]
        items = from_responses_items(request["input"])
        conversation = conversation + items if request.get("previous_response_id") else items
        head = [("system", request["instructions"])] if request.get("instructions") else []
        [reply] = from_responses_items(response["output"])
        calls.append((head + conversation, reply))
        conversation = [*conversation, reply]
    return calls


def from_anthropic(system: str | None, turns: list[dict[str, Any]]) -> list[Neutral]:
    out: list[Neutral] = [("system", system)] if system else []
    for turn in turns:
        content = turn["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if turn["role"] == "assistant":
            text = "".join(b["text"] for b in blocks if b["type"] == "text")
            calls = tuple(
                (b["id"], b["name"], b["input"]) for b in blocks if b["type"] == "tool_use"
            )
            out.append(("assistant", text, calls))
            continue
        out += [
            ("tool", b["tool_use_id"], b["content"]) for b in blocks if b["type"] == "tool_result"
        ]
        text = "".join(b["text"] for b in blocks if b["type"] == "text")
        if text:
            out.append(("user", text))
    return out


def program_calls(agent: str, state: State) -> list[tuple[list[Neutral], Neutral]]:
    log = json.loads(state["stdout"].strip().splitlines()[-1])["log"]
    if agent == "responses":
        return responses_calls(log)
    if agent == "anthropic":
        return [
            (
                from_anthropic(e["request"]["system"], e["request"]["messages"]),
                from_anthropic(None, [e["response"]])[0],
            )
            for e in log
        ]
    return [(from_chat(e["messages"]), from_chat([e["reply"]])[0]) for e in log]


def recorded_calls(record: RolloutRecord) -> list[tuple[list[Neutral], Neutral]]:
    messages = record.prompt + record.completion
    assert record.trace is not None
    return [
        (
            from_chat(path_messages(messages, record.trace.parents, call.request)),
            from_chat([messages[call.reply]])[0],
        )
        for call in record.trace.calls
    ]


def check_transcript(agent: str, record: RolloutRecord, state: State) -> None:
    assert record.error is None, record.error
    assert recorded_calls(record) == program_calls(agent, state)
    # Every message once: no two with the same text below the same parent (the subagent's
    # "say: 0" is a message of its own, under its own system prompt).
    messages = record.prompt + record.completion
    nodes = [(record.trace.parents[i], message_key(m)) for i, m in enumerate(messages)]
    assert len(set(nodes)) == len(nodes) == len(record.trace.parents), "a message is stored twice"
    assert record.reward == 1.0, agent_env.answer_of(state)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("args", ["", "--stateful --stream"])
async def test_responses_agent(servers: dict[str, FakeServer], provider: str, args: str) -> None:
    for record, state in await run("responses", servers[provider], args):
        check_transcript("responses", record, state)
        roles = [m["role"] for m in record.prompt + record.completion]
        assert roles == ["system", "user", "assistant", "tool", "assistant"]
        assert [(c.parent, c.request) for c in record.trace.calls] == [(None, 1), (0, 3)]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("args", ["", "--create"])
async def test_anthropic_agent_streaming(
    servers: dict[str, FakeServer], provider: str, args: str
) -> None:
    for record, state in await run("anthropic", servers[provider], args):
        check_transcript("anthropic", record, state)
        assert [m["role"] for m in record.completion] == ["assistant", "tool", "assistant"]
        assert record.completion[0]["tool_calls"][0]["function"]["name"] == "calc"
        # the tools the program offered, as OpenAI function specs (what an SFT export shows)
        assert record.tools is not None and record.tools[0]["function"]["name"] == "calc"


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_agent_with_own_system_prompt_and_a_subagent(
    servers: dict[str, FakeServer], provider: str
) -> None:
    """The main agent's second call continues its first (same branch); the subagent's fresh
    conversation is a branch of its own; nothing of the main conversation is stored twice."""
    for record, state in await run("subagent", servers[provider]):
        check_transcript("subagent", record, state)
        assert [m["content"] for m in record.prompt] == [
            "You are the lead agent. Answer with the number only.",
            record.prompt[1]["content"],
        ]
        assert [m["role"] for m in record.completion] == [
            "assistant",
            "system",
            "user",
            "assistant",
            "user",
            "assistant",
        ]
        calls = record.trace.calls
        assert [c.parent for c in calls] == [None, None, 0]
        assert record.trace.parents[3] is None  # the subagent's system prompt is a new root
        # as SFT data: the subagent's chat and the lead's, neither showing the other's messages
        subagent, lead = (s["messages"] for s in chat_samples(record))
        assert [m["role"] for m in subagent] == ["system", "user", "assistant"]
        assert [m["role"] for m in lead] == ["system", "user", "assistant", "user", "assistant"]
        assert lead[0]["content"].startswith("You are the lead agent")
