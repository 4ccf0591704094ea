"""A scripted ModelClient: a test double of the client PROTOCOL (not of any provider's wire format).

Each call pops the next scripted reply; a reply may be a string (assistant text), a message
dict, a ChatResponse, an exception to raise, or a callable(messages, tools) -> any of those.
Calls are recorded so tests can assert on what the harness sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from prime_env import ChatResponse, ModelError, SamplingArgs, Usage


def tool_call(name: str, arguments: str, call_id: str = "call_1") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


class ScriptedClient:
    model = "scripted-model"
    provider = "scripted"
    base_url = None

    def __init__(
        self, replies: list[Any] | Callable[[list[dict], Any], Any], delay: float = 0.0
    ) -> None:
        self.replies = replies
        self.delay = delay
        self.calls: list[dict[str, Any]] = []

    async def chat(
        self, messages, *, tools=None, sampling: SamplingArgs | None = None
    ) -> ChatResponse:
        self.calls.append(
            {"messages": [dict(m) for m in messages], "tools": tools, "sampling": sampling}
        )
        if self.delay:
            await asyncio.sleep(self.delay)
        if callable(self.replies):
            reply = self.replies(messages, tools)
        else:
            if not self.replies:
                raise AssertionError("scripted client ran out of replies")
            reply = self.replies.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, ChatResponse):
            return reply
        if isinstance(reply, str):
            reply = {"role": "assistant", "content": reply}
        finish = "tool_calls" if reply.get("tool_calls") else "stop"
        return ChatResponse(
            message=reply, finish_reason=finish, usage=Usage(prompt_tokens=10, completion_tokens=5)
        )

    async def aclose(self) -> None:
        return None


def always_calling(name: str, arguments: str) -> ScriptedClient:
    """A model that answers every turn with the same call of one tool (it never stops itself)."""
    return ScriptedClient(
        lambda m, t: {
            "role": "assistant",
            "content": None,
            "tool_calls": [tool_call(name, arguments)],
        }
    )


__all__ = ["ModelError", "ScriptedClient", "always_calling", "tool_call"]
