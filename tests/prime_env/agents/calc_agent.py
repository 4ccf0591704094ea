"""A tiny external agent: the real `openai` SDK against OPENAI_BASE_URL, with one local tool.

Used by the Program harness tests. `--stream` makes every call a streaming one; `--calls N`
keeps calling (for turn-limit tests); `--timeout S --retries N` set the SDK's own (for the
retry tests).
"""

from __future__ import annotations

import argparse
import json
import sys

from openai import OpenAI

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "calc",
            "description": "Evaluate an arithmetic expression.",
            "parameters": {
                "type": "object",
                "properties": {"expr": {"type": "string"}},
                "required": ["expr"],
            },
        },
    }
]


def call(client: OpenAI, messages: list, stream: bool) -> dict:
    if not stream:
        message = (
            client.chat.completions.create(model="any", messages=messages, tools=TOOLS)
            .choices[0]
            .message
        )
        return message.model_dump(exclude_none=True)
    content, tool_calls = "", {}
    for chunk in client.chat.completions.create(
        model="any",
        messages=messages,
        tools=TOOLS,
        stream=True,
        stream_options={"include_usage": True},
    ):
        for choice in chunk.choices:
            content += choice.delta.content or ""
            for tc in choice.delta.tool_calls or []:
                tool_calls[tc.index] = {
                    "id": tc.id,
                    "type": "function",
                    "function": {"name": tc.function.name, "arguments": tc.function.arguments},
                }
    message: dict = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = list(tool_calls.values())
    return message


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--retries", type=int, default=0)
    args = parser.parse_args()
    task = json.load(sys.stdin)
    client = OpenAI(max_retries=args.retries, timeout=args.timeout)
    messages = list(task["prompt"])
    for _ in range(args.calls):
        message = call(client, messages, args.stream)
        messages.append(message)
        if not message.get("tool_calls"):
            print(message["content"])
            return
        for tc in message["tool_calls"]:
            expr = json.loads(tc["function"]["arguments"])["expr"]
            messages.append(
                {"role": "tool", "tool_call_id": tc["id"], "content": str(eval(expr, {}))}
            )
    print("gave up")


if __name__ == "__main__":
    main()
