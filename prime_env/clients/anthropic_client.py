"""Anthropic Messages API through the official `anthropic` SDK.

Everything above the client speaks OpenAI-style messages; this module converts at the edge:
system messages become the `system` parameter, assistant `tool_calls` become `tool_use`
blocks, `tool` messages become `tool_result` blocks in a user turn (consecutive same-role turns
are merged, as the Messages API requires strict alternation), and the reply is converted back.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic

from prime_env.clients.base import ChatResponse, Message, SamplingArgs, ToolSpec, Usage
from prime_env.clients.retry import (
    AdaptiveLimiter,
    Failure,
    MalformedResponse,
    RetryPolicy,
    call_with_retries,
    classify_common,
    limiter_for,
    redact,
    status_failure,
)

DEFAULT_MAX_TOKENS = 4096
"""The Messages API requires max_tokens; this is used when the sampling args leave it unset."""

_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
    "pause_turn": "stop",
}


def classify(exc: BaseException) -> Failure:
    """Map anthropic SDK exceptions onto the shared failure classes."""
    common = classify_common(exc)
    if common is not None:
        return common
    if isinstance(exc, anthropic.APITimeoutError):
        return Failure("timeout", "the request timed out", retryable=True)
    if isinstance(exc, anthropic.APIConnectionError):
        return Failure("connection_error", f"connection failed: {exc}", retryable=True)
    if isinstance(exc, anthropic.APIStatusError):
        return status_failure(exc.status_code, exc.message, exc.response.headers.get("retry-after"))
    if isinstance(exc, anthropic.APIResponseValidationError):
        return Failure("malformed_response", str(exc), retryable=True)
    return Failure(type(exc).__name__, str(exc), retryable=False)


def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content if p.get("type") == "text")


def _user_blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    blocks: list[dict[str, Any]] = []
    for part in content or []:
        if part.get("type") == "text":
            blocks.append({"type": "text", "text": part["text"]})
        elif part.get("type") == "image_url":
            url = part["image_url"]["url"]
            if url.startswith("data:"):
                media, _, data = url[5:].partition(";base64,")
                blocks.append(
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": media, "data": data},
                    }
                )
            else:
                blocks.append({"type": "image", "source": {"type": "url", "url": url}})
    return blocks


def to_anthropic(messages: list[Message]) -> tuple[str | None, list[dict[str, Any]]]:
    """OpenAI chat messages -> (system, Messages API turns)."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for message in messages:
        role = message["role"]
        if role in ("system", "developer"):
            system.append(_text_of(message.get("content")))
            continue
        if role == "tool":
            role, blocks = (
                "user",
                [
                    {
                        "type": "tool_result",
                        "tool_use_id": message["tool_call_id"],
                        "content": _text_of(message.get("content")),
                    }
                ],
            )
        elif role == "assistant":
            text = _text_of(message.get("content"))
            blocks = [{"type": "text", "text": text}] if text else []
            for call in message.get("tool_calls") or []:
                try:
                    args = json.loads(call["function"]["arguments"] or "{}")
                except json.JSONDecodeError:
                    args = {}
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call["id"],
                        "name": call["function"]["name"],
                        "input": args,
                    }
                )
        else:
            blocks = _user_blocks(message.get("content"))
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return ("\n\n".join(system) if system else None), turns


def to_anthropic_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "name": t["function"]["name"],
            "description": t["function"].get("description", ""),
            "input_schema": t["function"].get("parameters") or {"type": "object", "properties": {}},
        }
        for t in tools
    ]


def from_anthropic(data: dict[str, Any]) -> ChatResponse:
    """A Messages API response body -> ChatResponse with an OpenAI-style message."""
    blocks = data.get("content")
    if not isinstance(blocks, list) or data.get("stop_reason") is None and not blocks:
        raise MalformedResponse(f"no content in response: {json.dumps(data)[:200]}")
    text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
    thinking = "".join(b.get("thinking", "") for b in blocks if b.get("type") == "thinking")
    calls = [
        {
            "id": b["id"],
            "type": "function",
            "function": {"name": b["name"], "arguments": json.dumps(b.get("input") or {})},
        }
        for b in blocks
        if b.get("type") == "tool_use"
    ]
    message: Message = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = calls
    if thinking:
        message["reasoning_content"] = thinking
    usage = data.get("usage") or {}
    return ChatResponse(
        message=message,
        finish_reason=_FINISH.get(data.get("stop_reason") or "", data.get("stop_reason")),
        usage=Usage(
            prompt_tokens=int(usage.get("input_tokens") or 0),
            completion_tokens=int(usage.get("output_tokens") or 0),
        ),
    )


class AnthropicClient:
    """A ModelClient for the Anthropic Messages API (or a compatible server at base_url)."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        provider: str = "anthropic",
        stream: bool = False,
        policy: RetryPolicy | None = None,
        limiter: AdaptiveLimiter | None = None,
    ) -> None:
        self.model = model
        self.provider = provider
        self.policy = policy or RetryPolicy()
        self.stream = stream
        self._client = anthropic.AsyncAnthropic(
            # A placeholder key for keyless self-hosted endpoints, as the OpenAI client does.
            base_url=base_url,
            api_key=api_key or "EMPTY",
            max_retries=0,
            timeout=self.policy.timeout_s,
        )
        self.base_url: str | None = str(self._client.base_url).rstrip("/")
        self.limiter = limiter or limiter_for(self.base_url or "")
        self._secret = api_key

    def _redact(self, text: str) -> str:
        return redact(text, self._secret)

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

    async def chat(
        self,
        messages: list[Message],
        *,
        tools: list[ToolSpec] | None = None,
        sampling: SamplingArgs | None = None,
    ) -> ChatResponse:
        request = self._request(messages, tools, sampling or SamplingArgs())

        async def attempt() -> ChatResponse:
            if self.stream:
                async with self._client.messages.stream(**request) as stream:
                    final = await stream.get_final_message()
            else:
                final = await self._client.messages.create(**request)
            return from_anthropic(final.model_dump(mode="json"))

        return await call_with_retries(attempt, classify, self.policy, self.limiter, self._redact)

    async def aclose(self) -> None:
        await self._client.close()
