"""The Anthropic Messages dialect (`POST /v1/messages`), streaming and not.

`system` becomes the system message; assistant `tool_use` blocks become tool calls, and a user
turn's `tool_result` blocks become tool messages (before the turn's own text), the inverse of
what `prime_env.clients.wire` sends to Anthropic.
"""

from __future__ import annotations

import json
from typing import Any

from ...clients.base import ChatResponse, Message, SamplingArgs
from ...clients.wire import tool_use_block
from .dialect import (
    BadRequest,
    Request,
    function_tools,
    new_id,
    number,
    reply_message,
    sse,
    stop_list,
    text_of,
)

_STOP = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}


class AnthropicMessages:
    def parse(self, body: dict[str, Any]) -> Request:
        messages: list[Message] = []
        system = body.get("system")
        if system:
            messages.append({"role": "system", "content": text_of(system)})
        turns = body.get("messages")
        if not isinstance(turns, list) or not turns:
            raise BadRequest("messages must be a non-empty list")
        for turn in turns:
            if not isinstance(turn, dict) or turn.get("role") not in ("user", "assistant"):
                raise BadRequest("every message must be an object with role user or assistant")
            content = turn.get("content")
            if turn["role"] == "assistant":
                messages.append(_assistant(content))
            else:
                messages += _user(content)
        wanted = SamplingArgs(
            max_tokens=number(body, "max_tokens"),
            temperature=number(body, "temperature"),
            top_p=number(body, "top_p"),
            stop=stop_list(body.get("stop_sequences")),
        )
        return Request(
            messages,
            function_tools(body.get("tools"), _input_schema),
            wanted,
            bool(body.get("stream")),
        )

    def render(self, response: ChatResponse, request: Request, model: str) -> dict[str, Any]:
        message = reply_message(response)
        blocks: list[dict[str, Any]] = []
        if message.get("content"):
            blocks.append({"type": "text", "text": message["content"]})
        blocks += [tool_use_block(call) for call in message.get("tool_calls") or []]
        if not blocks:
            blocks.append({"type": "text", "text": ""})
        return {
            "id": new_id("msg_"),
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": blocks,
            "stop_reason": _STOP.get(response.finish_reason or "stop", "end_turn"),
            "stop_sequence": None,
            "usage": {
                "input_tokens": response.usage.prompt_tokens,
                "output_tokens": response.usage.completion_tokens,
            },
        }

    def events(self, response: ChatResponse, request: Request, model: str) -> list[bytes]:
        full = self.render(response, request, model)
        usage = full["usage"]
        frames = [
            sse(
                {
                    "type": "message_start",
                    "message": {
                        **full,
                        "content": [],
                        "stop_reason": None,
                        "usage": {"input_tokens": usage["input_tokens"], "output_tokens": 0},
                    },
                },
                "message_start",
            )
        ]
        for index, block in enumerate(full["content"]):
            start: dict[str, Any]
            delta: dict[str, Any]
            if block["type"] == "text":
                start = {"type": "text", "text": ""}
                delta = {"type": "text_delta", "text": block["text"]}
            else:
                start = {**block, "input": {}}
                delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            frames.append(
                sse(
                    {"type": "content_block_start", "index": index, "content_block": start},
                    "content_block_start",
                )
            )
            frames.append(
                sse(
                    {"type": "content_block_delta", "index": index, "delta": delta},
                    "content_block_delta",
                )
            )
            frames.append(sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
        frames.append(
            sse(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": full["stop_reason"], "stop_sequence": None},
                    "usage": {"output_tokens": usage["output_tokens"]},
                },
                "message_delta",
            )
        )
        frames.append(sse({"type": "message_stop"}, "message_stop"))
        return frames

    def error(self, status: int, message: str, kind: str) -> dict[str, Any]:
        return {"type": "error", "error": {"type": kind, "message": message}}


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list) and all(isinstance(b, dict) for b in content):
        return content
    raise BadRequest(f"message content must be a string or a list of blocks, got {content!r:.60}")


def _assistant(content: Any) -> Message:
    text: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in _blocks(content):
        if block.get("type") == "text":
            text.append(str(block.get("text", "")))
        elif block.get("type") == "tool_use":
            calls.append(
                {
                    "id": block.get("id") or new_id("toolu_"),
                    "type": "function",
                    "function": {
                        "name": block.get("name", ""),
                        "arguments": json.dumps(block.get("input") or {}),
                    },
                }
            )
        elif block.get("type") not in ("thinking", "redacted_thinking"):
            raise BadRequest(f"assistant blocks of type {block.get('type')!r} are not supported")
    message: Message = {"role": "assistant", "content": "".join(text) or (None if calls else "")}
    if calls:
        message["tool_calls"] = calls
    return message


def _user(content: Any) -> list[Message]:
    results: list[Message] = []
    parts: list[dict[str, Any]] = []
    for block in _blocks(content):
        kind = block.get("type")
        if kind == "tool_result":
            inner = block.get("content")
            text = inner if isinstance(inner, str) else text_of(inner)
            results.append(
                {"role": "tool", "tool_call_id": block.get("tool_use_id", ""), "content": text}
            )
        elif kind == "text":
            parts.append({"type": "text", "text": str(block.get("text", ""))})
        elif kind == "image":
            source = block.get("source") or {}
            url = (
                f"data:{source.get('media_type')};base64,{source.get('data')}"
                if source.get("type") == "base64"
                else str(source.get("url", ""))
            )
            parts.append({"type": "image_url", "image_url": {"url": url}})
        else:
            raise BadRequest(f"user blocks of type {kind!r} are not supported")
    if parts:
        images = any(p["type"] == "image_url" for p in parts)
        results.append(
            {"role": "user", "content": parts if images else "".join(p["text"] for p in parts)}
        )
    return results


def _input_schema(tool: Any) -> Any:
    if not isinstance(tool, dict) or "input_schema" not in tool:
        raise BadRequest("only client tools {name, description, input_schema} are supported")
    return tool["input_schema"]
