"""An unchanged Chat Completions agent with its own system prompt that spawns a subagent.

The main agent answers the task in three steps: it asks the model first, hands the question to
a subagent (a fresh conversation with a system prompt of its own, as coding agents do for
research), then asks the model again with the subagent's finding added, continuing its own
conversation. It prints one JSON line: its answer and a log of every call (who made it, the
messages sent, the message received).
"""

from __future__ import annotations

import json
import sys

from openai import OpenAI

MAIN = "You are the lead agent. Answer with the number only."
SUB = "You are a research subagent. Report what you find in one line."


def main() -> None:
    task = json.load(sys.stdin)
    question = task["prompt"][-1]["content"]
    client = OpenAI()
    log = []

    def ask(who: str, messages: list[dict]) -> dict:
        reply = client.chat.completions.create(model="any", messages=messages)
        message = reply.choices[0].message.model_dump(exclude_none=True)
        log.append({"who": who, "messages": json.loads(json.dumps(messages)), "reply": message})
        return message

    conversation = [{"role": "system", "content": MAIN}, {"role": "user", "content": question}]
    first = ask("main", conversation)
    conversation.append({"role": "assistant", "content": first.get("content") or ""})
    finding = ask(
        "sub", [{"role": "system", "content": SUB}, {"role": "user", "content": question}]
    )
    conversation.append(
        {"role": "user", "content": f"A subagent reports: {finding.get('content')}"}
    )
    final = ask("main", conversation)
    print(json.dumps({"answer": final.get("content") or "", "log": log}))


if __name__ == "__main__":
    main()
