"""An unchanged Anthropic-SDK agent: `messages.stream(...)` with a tool, a tool loop
(`--create`: `messages.create(...)`, not streaming).

It prints one JSON line: its answer and a log of every request it sent and the final message
it received.
"""

from __future__ import annotations

import argparse
import json
import sys

from anthropic import Anthropic

TOOLS = [
    {
        "name": "calc",
        "description": "Evaluate an arithmetic expression.",
        "input_schema": {
            "type": "object",
            "properties": {"expr": {"type": "string"}},
            "required": ["expr"],
        },
    }
]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=4)
    parser.add_argument("--create", action="store_true")
    args = parser.parse_args()
    task = json.load(sys.stdin)
    client = Anthropic()
    messages: list[dict] = [{"role": "user", "content": task["prompt"][-1]["content"]}]
    log = []
    answer = ""
    for _ in range(args.calls):
        request = {
            "model": "any",
            "max_tokens": 256,
            "system": "You are a calculator agent.",
            "tools": TOOLS,
            "messages": json.loads(json.dumps(messages)),
        }
        if args.create:
            final = client.messages.create(**request).model_dump(mode="json")
        else:
            with client.messages.stream(**request) as stream:
                final = stream.get_final_message().model_dump(mode="json")
        log.append({"request": request, "response": final})
        content = [b for b in final["content"] if b["type"] in ("text", "tool_use")]
        messages.append({"role": "assistant", "content": content})
        answer = "".join(b["text"] for b in content if b["type"] == "text")
        uses = [b for b in content if b["type"] == "tool_use"]
        if not uses:
            break
        results = []
        for use in uses:
            try:
                result = str(eval(use["input"]["expr"], {}))
            except Exception as exc:  # noqa: BLE001 - the model's bad call is reported to it
                result = f"error: {exc}"
            results.append({"type": "tool_result", "tool_use_id": use["id"], "content": result})
        messages.append({"role": "user", "content": results})
    print(json.dumps({"answer": answer, "log": log}))


if __name__ == "__main__":
    main()
