"""A ModelClient that plays a scripted policy: the oracle (or anti-oracle) in these tests.

It implements the prime_env ModelClient protocol in-process, so rollouts go through the real
harness, tools, parsers and rubric exactly as with a hosted model; only the text the
"model" writes comes from a Python function instead of a network.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from prime_env import ChatResponse, Environment, SamplingArgs, Usage, run_rollouts, summarize

Message = dict[str, Any]
Reply = str | Message
Policy = Callable[[list[Message]], Reply | Awaitable[Reply]]


class PolicyClient:
    """`policy(messages)` returns the assistant's text, or a full message (e.g. with tool_calls)."""

    provider = "scripted"
    base_url = None

    def __init__(self, policy: Policy, model: str = "oracle") -> None:
        self.policy = policy
        self.model = model
        self.calls = 0

    async def chat(
        self,
        messages: list[Message],
        *,
        tools: list[dict[str, Any]] | None = None,
        sampling: SamplingArgs | None = None,
    ) -> ChatResponse:
        self.calls += 1
        reply = self.policy(messages)
        if hasattr(reply, "__await__"):
            reply = await reply  # type: ignore[misc]
        message = {"role": "assistant", "content": reply} if isinstance(reply, str) else dict(reply)
        text = message.get("content") or ""
        usage = Usage(
            prompt_tokens=sum(len(str(m.get("content") or "")) for m in messages) // 4,
            completion_tokens=max(1, len(text) // 4),
        )
        return ChatResponse(
            message=message,
            finish_reason="tool_calls" if message.get("tool_calls") else "stop",
            usage=usage,
        )

    async def aclose(self) -> None:
        return None


def tool_call(name: str, call_id: str, **arguments: Any) -> Message:
    """An assistant message calling one tool, in the OpenAI wire shape."""
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
        ],
    }


async def mean_reward(env: Environment, policy: Policy, n: int) -> float | None:
    """The mean reward of `policy` on `env`'s first `n` tasks, one rollout each."""
    return summarize(await run_rollouts(env, PolicyClient(policy), n=n)).reward_mean
