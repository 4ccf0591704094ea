"""An unchanged Responses-API agent: the real `openai` SDK, one local tool, a tool loop.

`--stateful` sends only the new items with `previous_response_id` after the first call, as
apps that let the server keep the conversation do; `--stream` streams every call. It prints
one JSON line: its answer and a log of every request it sent and response it received.
"""

from __future__ import annotations

import argparse
import json
import sys

from openai import OpenAI

TOOLS = [
    {
        "type": "function",
        "name": "calc",
        "description": "Evaluate an arithmetic expression.",
        "parameters": {
            "type": "object",
            "properties": {"expr": {"type": "string"}},
            "required": ["expr"],
        },
    }
]


def create(client: OpenAI, stream: bool, **request: object) -> dict:
    if not stream:
        return client.responses.create(**request).model_dump(mode="json")
    final = None
    for event in client.responses.create(stream=True, **request):
        if event.type == "response.completed":
            final = event.response
    assert final is not None, "the stream ended without response.completed"
    return final.model_dump(mode="json")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stateful", action="store_true")
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--calls", type=int, default=4)
    args = parser.parse_args()
    task = json.load(sys.stdin)
    question = task["prompt"][-1]["content"]
    client = OpenAI()
    history: list[dict] = [{"role": "user", "content": question}]
    new_items: list[dict] = list(history)
    previous = None
    log = []
    answer = ""
    for _ in range(args.calls):
        request: dict = {
            "model": "any",
            "instructions": "You are a calculator agent.",
            "tools": TOOLS,
        }
        if args.stateful and previous is not None:
            request |= {"input": new_items, "previous_response_id": previous}
        else:
            request |= {"input": history}
        sent = json.loads(json.dumps(request))  # as sent: `history` grows afterwards
        response = create(client, args.stream, **request)
        log.append({"request": sent, "response": response})
        previous = response["id"]
        output = response["output"]
        history += output
        calls = [item for item in output if item["type"] == "function_call"]
        texts = [c["text"] for item in output if item["type"] == "message" for c in item["content"]]
        answer = "".join(texts)
        if not calls:
            break
        new_items = []
        for call in calls:
            try:
                result = str(eval(json.loads(call["arguments"])["expr"], {}))
            except Exception as exc:  # noqa: BLE001 - the model's bad call is reported to it
                result = f"error: {exc}"
            item = {"type": "function_call_output", "call_id": call["call_id"], "output": result}
            history.append(item)
            new_items.append(item)
    print(json.dumps({"answer": answer, "log": log}))


if __name__ == "__main__":
    main()
