"""Anthropic Messages API through the official `anthropic` SDK.

Everything above the client speaks OpenAI-style messages; `wire` converts them to Messages API
turns and the reply back.
"""

from __future__ import annotations

from typing import Any

import anthropic

from prime_env.clients.base import ChatResponse, Message, SamplingArgs, ToolSpec
from prime_env.clients.retry import Failure
from prime_env.clients.sdk_client import SDKClient, classify_sdk_error
from prime_env.clients.wire import from_anthropic, to_anthropic, to_anthropic_tools

DEFAULT_MAX_TOKENS = 4096
"""The Messages API requires max_tokens; this is used when the sampling args leave it unset."""


def classify(exc: BaseException) -> Failure:
    """Map anthropic SDK exceptions onto the shared failure classes."""
    return classify_sdk_error(exc, anthropic)


class AnthropicClient(SDKClient):
    """A ModelClient for the Anthropic Messages API (or a compatible server at base_url)."""

    classify = staticmethod(classify)
    default_provider = "anthropic"

    def _make_client(self, base_url: str | None, api_key: str) -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(
            base_url=base_url, api_key=api_key, max_retries=0, timeout=self.policy.timeout_s
        )

    def _request(
        self, messages: list[Message], tools: list[ToolSpec] | None, sampling: SamplingArgs
    ) -> dict[str, Any]:
        system, turns = to_anthropic(messages)
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": turns,
            "max_tokens": sampling.max_tokens or DEFAULT_MAX_TOKENS,
        }
        if system:
            kwargs["system"] = system
        if tools:
            kwargs["tools"] = to_anthropic_tools(tools)
        if sampling.stop:
            kwargs["stop_sequences"] = sampling.stop
        # temperature/top_p go through extra_body: they are Messages API fields, but recent SDK
        # releases dropped them from create()'s typed signature.
        extra = {
            k: v
            for k, v in (("temperature", sampling.temperature), ("top_p", sampling.top_p))
            if v is not None
        }
        extra.update(sampling.extra)
        if extra:
            kwargs["extra_body"] = extra
        return kwargs

    async def _attempt(self, request: dict[str, Any]) -> ChatResponse:
        if self.stream:
            async with self._client.messages.stream(**request) as stream:
                final = await stream.get_final_message()
        else:
            final = await self._client.messages.create(**request)
        return from_anthropic(final.model_dump(mode="json"))
