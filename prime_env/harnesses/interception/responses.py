"""The OpenAI Responses dialect (`POST /v1/responses`), streaming and not.

Input items become chat messages: `instructions` the system message, `message` items by role,
`function_call` items the tool calls of the assistant message they follow, and
`function_call_output` items tool messages. `previous_response_id` continues a conversation
this server stored (each response's conversation per rollout, without its instructions: a
request's own `instructions` replace the earlier ones, as in the API).
"""

from __future__ import annotations

import json
import time
from typing import Any

from ...clients.base import ChatResponse, Message, SamplingArgs
from .dialect import (
    BadRequest,
    Request,
    function_tools,
    new_id,
    number,
    reply_message,
    sse,
    text_of,
)


class Responses:
    def parse(self, body: dict[str, Any]) -> Request:
        messages: list[Message] = []
        instructions = body.get("instructions")
        raw = body.get("input")
        if isinstance(raw, str):
            messages.append({"role": "user", "content": raw})
        elif isinstance(raw, list):
            for item in raw:
                _add_item(messages, item)
        elif raw is not None:
            raise BadRequest("input must be a string or a list of items")
        if not messages and not instructions and not body.get("previous_response_id"):
            raise BadRequest("the request has no input")
        previous = body.get("previous_response_id")
        if previous is not None and not isinstance(previous, str):
            raise BadRequest("previous_response_id must be a string")
        wanted = SamplingArgs(
            max_tokens=number(body, "max_output_tokens"),
            temperature=number(body, "temperature"),
            top_p=number(body, "top_p"),
        )
        system = {"role": "system", "content": text_of(instructions)} if instructions else None
        return Request(
            messages,
            function_tools(body.get("tools"), _parameters),
            wanted,
            bool(body.get("stream")),
            previous,
            system,
        )

    def render(self, response: ChatResponse, request: Request, model: str) -> dict[str, Any]:
        cut = response.finish_reason == "length"
        usage = response.usage
        return {
            "id": request.options.setdefault("response_id", new_id("resp_")),
            "object": "response",
            "created_at": int(time.time()),
            "status": "incomplete" if cut else "completed",
            "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
            "error": None,
            "model": model,
            "instructions": None,
            "output": _output(response),
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [
                {"type": "function", "strict": False, **t["function"]} for t in request.tools or []
            ],
            "temperature": None,
            "top_p": None,
            "max_output_tokens": request.wanted.max_tokens,
            "previous_response_id": request.previous,
            "text": {"format": {"type": "text"}},
            "truncation": "disabled",
            "metadata": {},
            "usage": {
                "input_tokens": usage.prompt_tokens,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": usage.completion_tokens,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": usage.prompt_tokens + usage.completion_tokens,
            },
        }

    def events(self, response: ChatResponse, request: Request, model: str) -> list[bytes]:
        full = self.render(response, request, model)
        frames: list[bytes] = []

        def emit(kind: str, **data: Any) -> None:
            frames.append(sse({"type": kind, "sequence_number": len(frames), **data}, kind))

        opening = {**full, "status": "in_progress", "output": [], "usage": None}
        emit("response.created", response=opening)
        emit("response.in_progress", response=opening)
        for index, item in enumerate(full["output"]):
            if item["type"] == "message":
                emit(
                    "response.output_item.added",
                    output_index=index,
                    item={**item, "status": "in_progress", "content": []},
                )
                part = item["content"][0]
                ids = {"item_id": item["id"], "output_index": index, "content_index": 0}
                emit("response.content_part.added", **ids, part={**part, "text": ""})
                emit("response.output_text.delta", **ids, delta=part["text"], logprobs=[])
                emit("response.output_text.done", **ids, text=part["text"], logprobs=[])
                emit("response.content_part.done", **ids, part=part)
            else:
                emit(
                    "response.output_item.added",
                    output_index=index,
                    item={**item, "status": "in_progress", "arguments": ""},
                )
                ids = {"item_id": item["id"], "output_index": index}
                emit("response.function_call_arguments.delta", **ids, delta=item["arguments"])
                emit(
                    "response.function_call_arguments.done",
                    **ids,
                    name=item["name"],
                    arguments=item["arguments"],
                )
            emit("response.output_item.done", output_index=index, item=item)
        emit(
            "response.incomplete" if full["status"] == "incomplete" else "response.completed",
            response=full,
        )
        return frames

    def error(self, status: int, message: str, kind: str) -> dict[str, Any]:
        return {"error": {"message": message, "type": kind, "param": None, "code": status}}


def _output(response: ChatResponse) -> list[dict[str, Any]]:
    message = reply_message(response)
    items: list[dict[str, Any]] = []
    if message.get("content") or not message.get("tool_calls"):
        items.append(
            {
                "type": "message",
                "id": new_id("msg_"),
                "status": "completed",
                "role": "assistant",
                "content": [
                    {"type": "output_text", "text": message.get("content") or "", "annotations": []}
                ],
            }
        )
    for call in message.get("tool_calls") or []:
        items.append(
            {
                "type": "function_call",
                "id": new_id("fc_"),
                "call_id": call["id"],
                "name": call["function"]["name"],
                "arguments": call["function"]["arguments"],
                "status": "completed",
            }
        )
    return items


def _add_item(messages: list[Message], item: Any) -> None:
    if not isinstance(item, dict):
        raise BadRequest(f"input items must be objects, got {item!r:.60}")
    kind = item.get("type", "message")
    if kind == "message":
        role = item.get("role")
        if role not in ("user", "system", "developer", "assistant"):
            raise BadRequest(f"unknown message role {role!r}")
        content = item.get("content")
        if isinstance(content, list) and any(
            isinstance(p, dict) and p.get("type") == "input_image" for p in content
        ):
            parts = [_part(p) for p in content]
            messages.append({"role": role, "content": parts})
        else:
            messages.append({"role": role, "content": text_of(content)})
    elif kind == "function_call":
        call = {
            "id": item.get("call_id") or item.get("id") or new_id("call_"),
            "type": "function",
            "function": {"name": item.get("name", ""), "arguments": item.get("arguments") or "{}"},
        }
        last = messages[-1] if messages else None
        if last is not None and last["role"] == "assistant":
            last.setdefault("tool_calls", []).append(call)
            if last.get("content") == "":
                last["content"] = None
        else:
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
    elif kind == "function_call_output":
        output = item.get("output")
        messages.append(
            {
                "role": "tool",
                "tool_call_id": item.get("call_id", ""),
                "content": output if isinstance(output, str) else text_of(output),
            }
        )
    elif kind == "reasoning":
        return  # the model behind this server writes no reasoning items; none to replay
    else:
        raise BadRequest(f"input items of type {kind!r} are not supported by this server")


def _part(part: dict[str, Any]) -> dict[str, Any]:
    if part.get("type") == "input_image":
        return {"type": "image_url", "image_url": {"url": part.get("image_url", "")}}
    return {"type": "text", "text": str(part.get("text", ""))}


def _parameters(tool: Any) -> Any:
    if not isinstance(tool, dict) or tool.get("type") != "function":
        kind = tool.get("type") if isinstance(tool, dict) else tool
        raise BadRequest(f"only function tools are supported, got {json.dumps(kind)}")
    return tool.get("parameters") or {"type": "object", "properties": {}}
