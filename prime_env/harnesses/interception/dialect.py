"""What every API dialect of the interception server shares: a request in the SDK's terms and
the merge of the program's sampling settings under the run's."""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ...clients.base import ChatResponse, Message, SamplingArgs, ToolSpec


class BadRequest(ValueError):
    """The program sent a request this dialect cannot take; the message says why (a 400)."""


@dataclass
class Request:
    """A program's model call as chat messages, tools and the settings it asked for."""

    messages: list[Message]
    tools: list[ToolSpec] | None
    wanted: SamplingArgs
    stream: bool = False
    previous: str | None = None
    """The Responses API's `previous_response_id`: the stored conversation it continues."""
    system: Message | None = None
    """The Responses API's `instructions`: put before the conversation, never stored in it."""
    options: dict[str, Any] = field(default_factory=dict)
    """Dialect-specific echoes (e.g. chat's `stream_options.include_usage`)."""


class Dialect(Protocol):
    """One API's wire format: parse its requests, render the model's reply (whole or as
    server-sent events) and its error bodies."""

    def parse(self, body: dict[str, Any]) -> Request: ...

    def render(self, response: ChatResponse, request: Request, model: str) -> dict[str, Any]: ...

    def events(self, response: ChatResponse, request: Request, model: str) -> list[bytes]: ...

    def error(self, status: int, message: str, kind: str) -> dict[str, Any]: ...


def merge_sampling(run: SamplingArgs, wanted: SamplingArgs, cap: int | None) -> SamplingArgs:
    """The run's settings win; the program's fill in what the run left open; `cap` (the
    rollout's remaining token budget) bounds max_tokens."""
    limits = [x for x in (run.max_tokens, wanted.max_tokens, cap) if x is not None]
    return SamplingArgs(
        max_tokens=min(limits) if limits else None,
        temperature=run.temperature if run.temperature is not None else wanted.temperature,
        top_p=run.top_p if run.top_p is not None else wanted.top_p,
        stop=run.stop if run.stop is not None else wanted.stop,
        seed=run.seed if run.seed is not None else wanted.seed,
        logprobs=run.logprobs or wanted.logprobs,
        extra=run.extra,
    )


def function_tools(raw: Any, parameters_of: Callable[[Any], Any]) -> list[ToolSpec] | None:
    """A request's `tools` as the SDK's function tools (None when it has none); a dialect's
    `parameters_of(tool)` reads a tool's JSON schema, a BadRequest for a tool it cannot take."""
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise BadRequest("tools must be a list")
    specs: list[ToolSpec] = []
    for tool in raw:
        parameters = parameters_of(tool)
        specs.append(
            {
                "type": "function",
                "function": {
                    "name": tool.get("name", ""),
                    "description": tool.get("description") or "",
                    "parameters": parameters,
                },
            }
        )
    return specs or None


def new_id(prefix: str) -> str:
    return prefix + secrets.token_hex(12)


def sse(data: dict[str, Any], event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def text_of(content: Any) -> str:
    """Text of a message content: a string, or text parts of any of the three dialects."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") in ("text", "input_text", "output_text")
        )
    raise BadRequest(f"message content must be a string or a list of parts, got {content!r:.80}")


def stop_list(value: Any) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(s, str) for s in value):
        return list(value)
    raise BadRequest("stop must be a string or a list of strings")


def number(body: dict[str, Any], *names: str) -> Any:
    """The first of `names` present in `body`, checked to be a number (or None)."""
    for name in names:
        value = body.get(name)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise BadRequest(f"{name} must be a number, got {value!r:.40}")
            return value
    return None


def reply_message(response: ChatResponse) -> Message:
    """The assistant message as every dialect renders it (and as the trace stores it)."""
    message: Message = {"role": "assistant", "content": response.message.get("content")}
    if response.message.get("tool_calls"):
        message["tool_calls"] = [
            {
                "id": call.get("id") or new_id("call_"),
                "type": "function",
                "function": {
                    "name": call["function"]["name"],
                    "arguments": call["function"].get("arguments") or "{}",
                },
            }
            for call in response.message["tool_calls"]
        ]
    elif message["content"] is None:
        message["content"] = ""
    return message
