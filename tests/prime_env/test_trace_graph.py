"""The trace graph: messages once (however an SDK re-serialises them), calls continuing the
call whose reply their request passes through, new branches for subagents and edited
histories, and `sample` bridging token ids when the client takes them."""

from __future__ import annotations

from prime_env import ChatResponse, SamplingArgs, Usage
from prime_env.clients.base import TokenClient
from prime_env.trace_graph import TraceGraph, extends, message_key, path_messages, sample

SYSTEM = {"role": "system", "content": "You are an agent."}
USER = {"role": "user", "content": "go"}
CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
    ],
}


def test_an_sdk_reserialising_a_message_sends_the_same_message() -> None:
    resent = {
        "role": "assistant",
        "content": "",
        "refusal": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{ "a":1 }'}}
        ],
    }
    assert message_key(CALL) == message_key(resent)
    parts = {"role": "user", "content": [{"type": "input_text", "text": "go"}]}
    assert message_key(parts) == message_key(USER)
    assert message_key({"role": "user", "content": "go!"}) != message_key(USER)


def test_calls_continue_the_call_whose_reply_they_pass_through() -> None:
    graph = TraceGraph()
    first = graph.insert([SYSTEM, USER])
    assert graph.continued(first) is None
    graph.add_call(first, CALL, None)
    tool = {"role": "tool", "tool_call_id": "c1", "content": "2"}
    second = graph.insert([SYSTEM, USER, CALL, tool])
    assert second[:3] == [0, 1, 2] and graph.continued(second) == 0
    assert graph.new_messages(second, 0) == [tool]
    graph.add_call(second, {"role": "assistant", "content": "done"}, 0)
    # a subagent's fresh conversation is a new root; an edited history is a new branch
    sub = graph.insert([{"role": "system", "content": "sub"}, USER])
    assert graph.continued(sub) is None and graph.parents[sub[0]] is None
    edited = graph.insert([SYSTEM, USER, {"role": "assistant", "content": "other"}, tool])
    assert graph.continued(edited) is None and edited[:2] == [0, 1]
    assert len(graph.messages) == len(set(zip(graph.parents, map(message_key, graph.messages))))
    assert graph.request(1) == [SYSTEM, USER, {**CALL}, tool]
    record = graph.to_record()
    assert [c.parent for c in record.calls] == [None, 0]
    assert path_messages(graph.messages, record.parents, record.calls[1].reply)[-1] == {
        "role": "assistant",
        "content": "done",
    }


def test_extends_is_the_token_rule() -> None:
    assert extends([1, 2, 3, 4, 5], [1, 2], [3, 4])
    assert not extends([1, 2, 9, 4, 5], [1, 2], [3, 4])
    assert not extends([1, 2, 3], [1, 2], [3, 4])
    assert not extends(None, [1], [2])


class Bridging:
    """A TokenClient double: records which entry point was used."""

    model, provider, base_url = "m", "test", None

    def __init__(self, tail: list[int] | None) -> None:
        self.tail = tail
        self.used: list[tuple[str, list[int] | None]] = []

    def bridge(self, completion_ids, messages, tools):
        return self.tail

    async def chat_ids(self, prompt_ids, messages, *, tools=None, sampling=None):
        self.used.append(("ids", list(prompt_ids)))
        return ChatResponse({"role": "assistant", "content": "x"}, "stop", Usage(1, 1))

    async def chat(self, messages, *, tools=None, sampling=None):
        self.used.append(("messages", None))
        return ChatResponse({"role": "assistant", "content": "x"}, "stop", Usage(1, 1))

    async def aclose(self) -> None:
        return None


async def test_sample_bridges_from_the_parents_ids() -> None:
    parent = ChatResponse(CALL, "tool_calls", Usage(2, 2), [1, 2], [3, 4], [-1.0, -1.0])
    client = Bridging([7, 8])
    assert isinstance(client, TokenClient)
    await sample(client, [USER], None, SamplingArgs(), parent, [USER])
    assert client.used == [("ids", [1, 2, 3, 4, 7, 8])]
    unprovable = Bridging(None)
    await sample(unprovable, [USER], None, SamplingArgs(), parent, [USER])
    assert unprovable.used == [("messages", None)]
    await sample(client, [USER], None, SamplingArgs())  # a first call: nothing to continue
    assert client.used[-1] == ("messages", None)
