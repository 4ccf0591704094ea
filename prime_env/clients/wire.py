"""Wire formats: provider request and response bodies to and from the SDK's messages.

Everything above the clients speaks OpenAI-style chat messages and `ChatResponse`; this module
is the only place that knows another shape. OpenAI-compatible bodies (`from_openai`, and
`from_openai_stream` for server-sent chunks) carry vLLM's extras when present: `prompt_token_ids`
and per-choice `token_ids` (`return_token_ids`), and logprob tokens spelled `token_id:N`
(`return_tokens_as_token_ids`), so training gets exact token ids without retokenising.
For the Anthropic Messages API, system messages become the `system` parameter, assistant
`tool_calls` become `tool_use` blocks, `tool` messages become `tool_result` blocks in a user turn
(consecutive same-role turns are merged, as the API requires strict alternation), and the reply
is converted back.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable
from typing import Any

from prime_env.clients.base import ChatResponse, Message, ToolSpec, Usage
from prime_env.clients.retry import MalformedResponse

# -- OpenAI-compatible chat completions ---------------------------------------------------


def from_openai(data: dict[str, Any]) -> ChatResponse:
    """Turn a chat.completion body into a ChatResponse; raise MalformedResponse if unusable."""
    choices = data.get("choices")
    if not choices or not isinstance(choices[0].get("message"), dict):
        raise MalformedResponse(f"no choices in response: {json.dumps(data)[:200]}")
    choice = choices[0]
    raw = choice["message"]
    message: Message = {"role": "assistant", "content": raw.get("content")}
    if raw.get("tool_calls"):
        message["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {
                    "name": c["function"]["name"],
                    "arguments": c["function"]["arguments"],
                },
            }
            for c in raw["tool_calls"]
        ]
    if raw.get("reasoning_content"):  # DeepSeek/GLM: must be sent back on the next turn
        message["reasoning_content"] = raw["reasoning_content"]
    usage = data.get("usage") or {}
    entries = (choice.get("logprobs") or {}).get("content") or []
    completion_ids = choice.get("token_ids")
    if (
        completion_ids is None
        and entries
        and all(str(e.get("token", "")).startswith("token_id:") for e in entries)
    ):
        completion_ids = [int(e["token"].split(":", 1)[1]) for e in entries]
    return ChatResponse(
        message=message,
        finish_reason=choice.get("finish_reason"),
        usage=Usage(
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
        ),
        prompt_token_ids=data.get("prompt_token_ids"),
        completion_token_ids=completion_ids,
        completion_logprobs=[float(e["logprob"]) for e in entries] if entries else None,
        model=_served(data),
    )


def _served(data: dict[str, Any]) -> str | None:
    model = data.get("model")
    return model if isinstance(model, str) and model else None


async def from_openai_stream(chunks: AsyncIterable[object]) -> ChatResponse:
    """Assemble streamed `chat.completion.chunk`s (content, reasoning, tool-call fragments,
    logprobs, usage) into one ChatResponse."""
    content: list[str] = []
    reasoning: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    logprobs: list[dict[str, Any]] = []
    finish: str | None = None
    usage: dict[str, Any] = {}
    served: str | None = None
    async for data in chunks:
        if not isinstance(data, dict):
            raise MalformedResponse(f"stream chunk is not an object: {data!r:.200}")
        usage = data.get("usage") or usage
        served = _served(data) or served
        for choice in data.get("choices") or []:
            delta = choice.get("delta") or {}
            content.append(delta.get("content") or "")
            reasoning.append(delta.get("reasoning_content") or "")
            for call in delta.get("tool_calls") or []:
                slot = calls.setdefault(
                    call["index"],
                    {"id": None, "type": "function", "function": {"name": "", "arguments": ""}},
                )
                slot["id"] = call.get("id") or slot["id"]
                function = call.get("function") or {}
                slot["function"]["name"] += function.get("name") or ""
                slot["function"]["arguments"] += function.get("arguments") or ""
            logprobs += (choice.get("logprobs") or {}).get("content") or []
            finish = choice.get("finish_reason") or finish
    if finish is None:
        raise MalformedResponse("the stream ended without a finish_reason")
    message: dict[str, Any] = {"role": "assistant", "content": "".join(content) or None}
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    if any(reasoning):
        message["reasoning_content"] = "".join(reasoning)
    return from_openai(
        {
            "choices": [
                {
                    "message": message,
                    "finish_reason": finish,
                    "logprobs": {"content": logprobs} if logprobs else None,
                }
            ],
            "usage": usage,
            "model": served,
        }
    )


# -- Anthropic Messages API ---------------------------------------------------------------

_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
    "pause_turn": "stop",
}


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
            blocks += [tool_use_block(call) for call in message.get("tool_calls") or []]
        else:
            blocks = _user_blocks(message.get("content"))
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return ("\n\n".join(system) if system else None), turns


def tool_use_block(call: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI-style tool call as an Anthropic `tool_use` block; its input is the arguments'
    JSON object ({} when they are not one: the API takes nothing else)."""
    try:
        arguments = json.loads(call["function"]["arguments"] or "{}")
    except json.JSONDecodeError:
        arguments = {}
    return {
        "type": "tool_use",
        "id": call["id"],
        "name": call["function"]["name"],
        "input": arguments if isinstance(arguments, dict) else {},
    }


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
        model=_served(data),
    )
