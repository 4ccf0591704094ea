"""The trace graph of a rollout: every message stored once, every model call a node.

Messages form a tree: a request is a path from a root (its system or first message) to its
last message, and a call's reply hangs below that. A request that passes through an earlier
call's reply continues that call (a later turn of the same agent); one that does not starts a
new branch (a subagent, a compacted or edited history). Token for token, a continuation's
prompt is the earlier prompt + completion ids + the new messages' rendered tokens (`sample`
asks a `TokenClient` to bridge them, as the renderers library's `bridge_to_next_turn`, never
re-tokenising the text); with a client that takes only messages, the call continues its
parent only if the prompt ids the server returned start with the parent's (`extends`). Each
root-to-leaf path of calls is one training sample (trainer_bridge/orchestrator/samples.py).

Linear rollouts (every in-process harness) need no graph: call i's request is everything
before its reply, and the record's `trace` stays null.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from .clients.base import ChatResponse, Message, ModelClient, SamplingArgs, TokenClient, ToolSpec
from .record import Trace, TraceCall


def extends(
    prompt_ids: Sequence[int] | None,
    parent_prompt: Sequence[int] | None,
    parent_completion: Sequence[int] | None,
) -> bool:
    """Whether a call with `prompt_ids` continues its parent token for token (the one rule the
    graph and the trainer's samples share)."""
    if prompt_ids is None or parent_prompt is None or parent_completion is None:
        return False
    head = len(parent_prompt) + len(parent_completion)
    return (
        len(prompt_ids) >= head
        and list(prompt_ids[: len(parent_prompt)]) == list(parent_prompt)
        and list(prompt_ids[len(parent_prompt) : head]) == list(parent_completion)
    )


async def sample(
    client: ModelClient,
    messages: list[Message],
    tools: list[ToolSpec] | None,
    sampling: SamplingArgs,
    parent: ChatResponse | None = None,
    new: list[Message] | None = None,
) -> ChatResponse:
    """One model call on `messages`. When it continues `parent` (whose reply `new` follows) and
    the client takes token ids, the prompt is the parent's ids bridged to the new messages."""
    if (
        parent is not None
        and new is not None
        and parent.prompt_token_ids is not None
        and parent.completion_token_ids is not None
        and isinstance(client, TokenClient)
    ):
        tail = client.bridge(parent.completion_token_ids, new, tools)
        if tail is not None:
            ids = [*parent.prompt_token_ids, *parent.completion_token_ids, *tail]
            return await client.chat_ids(ids, messages, tools=tools, sampling=sampling)
    return await client.chat(messages, tools=tools, sampling=sampling)


def message_key(message: Message) -> str:
    """What makes two messages the same message: role, text, tool calls (arguments compared as
    JSON values) and the tool call answered. An SDK that re-serialises a reply (`content: null`
    vs "", text parts vs a string, re-dumped arguments) still sends the same message."""
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(
            str(part.get("text", ""))
            if part.get("type") in ("text", "input_text", "output_text")
            else json.dumps(part, sort_keys=True)
            for part in content
        )
    calls = []
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        arguments = function.get("arguments")
        try:
            arguments = json.loads(arguments) if isinstance(arguments, str) else arguments
        except json.JSONDecodeError:
            pass
        calls.append([call.get("id"), function.get("name"), arguments])
    return json.dumps(
        [message.get("role"), content or "", calls, message.get("tool_call_id")],
        sort_keys=True,
        default=str,
    )


class TraceGraph:
    """The message tree and call nodes of one rollout (built by the interception server)."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.parents: list[int | None] = []
        self.calls: list[TraceCall] = []
        self._children: dict[tuple[int | None, str], int] = {}
        self._reply_call: dict[int, int] = {}

    def insert(self, messages: Sequence[Message], below: int | None = None) -> list[int]:
        """The tree indices of `messages` as one path (starting below `below`), adding the ones
        not seen yet."""
        path: list[int] = []
        parent = below
        for message in messages:
            key = (parent, message_key(message))
            index = self._children.get(key)
            if index is None:
                index = len(self.messages)
                self.messages.append(dict(message))
                self.parents.append(parent)
                self._children[key] = index
            path.append(index)
            parent = index
        return path

    def continued(self, path: Sequence[int]) -> int | None:
        """The call a request on `path` continues: the latest whose reply lies on the path."""
        for index in reversed(path):
            call = self._reply_call.get(index)
            if call is not None:
                return call
        return None

    def new_messages(self, path: Sequence[int], call: int) -> list[Message]:
        """The request's messages after call `call`'s reply."""
        reply = self.calls[call].reply
        return [self.messages[i] for i in path[path.index(reply) + 1 :]]

    def add_call(self, path: Sequence[int], reply: Message, parent: int | None) -> int:
        """Record a call (its request `path`, its reply) continuing `parent`; its index."""
        last = path[-1] if path else None
        [reply_index] = self.insert([reply], below=last)
        self.calls.append(TraceCall(request=last, reply=reply_index, parent=parent))
        self._reply_call[reply_index] = len(self.calls) - 1
        return len(self.calls) - 1

    def request(self, call: int) -> list[Message]:
        """The messages call `call` was sent, rebuilt from the tree."""
        return path_messages(self.messages, self.parents, self.calls[call].request)

    def to_record(self) -> Trace:
        return Trace(parents=list(self.parents), calls=list(self.calls))


def path_messages(
    messages: Sequence[Message], parents: Sequence[int | None], last: int | None
) -> list[Message]:
    """The messages from a root of the tree down to `last`."""
    path: list[Message] = []
    while last is not None:
        path.append(messages[last])
        last = parents[last]
    return path[::-1]


def linear_trace(replies: Sequence[int], total: int, simulated: Sequence[int] = ()) -> Trace:
    """The trace of a linear rollout of `total` messages whose calls' replies are at `replies`:
    what a record carries when it marks messages (a simulated user's) but has no graph."""
    calls = [
        TraceCall(request=reply - 1 if reply else None, reply=reply, parent=i - 1 if i else None)
        for i, reply in enumerate(replies)
    ]
    return Trace(
        parents=[i - 1 if i else None for i in range(total)],
        calls=calls,
        simulated=sorted(simulated),
    )


__all__ = [
    "TraceGraph",
    "extends",
    "linear_trace",
    "message_key",
    "path_messages",
    "sample",
]
