"""The Chat Completions dialect (`POST /v1/chat/completions`), streaming and not."""

from __future__ import annotations

import time
from typing import Any

from ...clients.base import ChatResponse, SamplingArgs
from .dialect import BadRequest, Request, new_id, number, reply_message, sse, stop_list


class ChatCompletions:
    def parse(self, body: dict[str, Any]) -> Request:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise BadRequest("messages must be a non-empty list")
        for message in messages:
            if not isinstance(message, dict) or not isinstance(message.get("role"), str):
                raise BadRequest("every message must be an object with a role")
        tools = body.get("tools")
        if tools is not None and not (
            isinstance(tools, list) and all(isinstance(t, dict) and "function" in t for t in tools)
        ):
            raise BadRequest("tools must be a list of {type: function, function: {...}}")
        wanted = SamplingArgs(
            max_tokens=number(body, "max_completion_tokens", "max_tokens"),
            temperature=number(body, "temperature"),
            top_p=number(body, "top_p"),
            stop=stop_list(body.get("stop")),
            seed=number(body, "seed"),
            logprobs=bool(body.get("logprobs")),
        )
        return Request(
            [dict(m) for m in messages],
            tools or None,
            wanted,
            stream=bool(body.get("stream")),
            options={"usage": bool((body.get("stream_options") or {}).get("include_usage"))},
        )

    def render(self, response: ChatResponse, request: Request, model: str) -> dict[str, Any]:
        usage = response.usage
        return {
            "id": new_id("chatcmpl-"),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": reply_message(response),
                    "finish_reason": response.finish_reason or "stop",
                    "logprobs": None,
                }
            ],
            "usage": {
                "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens,
                "total_tokens": usage.prompt_tokens + usage.completion_tokens,
            },
        }

    def events(self, response: ChatResponse, request: Request, model: str) -> list[bytes]:
        full = self.render(response, request, model)
        message = full["choices"][0]["message"]
        delta: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
        if message.get("tool_calls"):
            delta["tool_calls"] = [
                {"index": i, **call} for i, call in enumerate(message["tool_calls"])
            ]
        base = {k: full[k] for k in ("id", "created", "model")} | {
            "object": "chat.completion.chunk"
        }
        finish = full["choices"][0]["finish_reason"]
        chunks = [
            {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
            {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
        ]
        if request.options.get("usage"):
            chunks.append({**base, "choices": [], "usage": full["usage"]})
        return [sse(chunk) for chunk in chunks] + [b"data: [DONE]\n\n"]

    def error(self, status: int, message: str, kind: str) -> dict[str, Any]:
        return {"error": {"message": message, "type": kind, "param": None, "code": status}}
