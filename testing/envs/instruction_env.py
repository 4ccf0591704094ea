"""A prompt-sensitive environment for the fake providers: the system prompt decides the reward.

Its harness writes the system prompt into the user turn, as chat templates without a system role
do, so the fake model (which reads only the last user message) sees it: a prompt ending in
`say:` makes it answer the task's word alone (reward 1); any other prompt makes it echo the whole
turn (reward 0). `prime eval optimize`'s test searches for such a prompt with a scripted
reflection model.
"""

from __future__ import annotations

from typing import Any

import prime_env as pe


class InlineSystemPrompt(pe.SingleTurn):
    """SingleTurn for models without a system role: the system prompt opens the user turn."""

    def build_prompt(self, task: pe.Task) -> list[dict[str, Any]]:
        prompt = [dict(m) for m in task.prompt]
        if self.system_prompt:
            prompt[-1]["content"] = f"{self.system_prompt}\n\n{prompt[-1]['content']}"
        return prompt


def exact(completion: list[dict[str, Any]], answer: str) -> float:
    return 1.0 if (pe.last_assistant_text(completion) or "").strip() == answer else 0.0


def load_environment(
    num_tasks: int = 24, system_prompt: str = "Answer the question."
) -> pe.Environment:
    records = [{"prompt": f"w{i}", "answer": f"w{i}", "id": f"t{i}"} for i in range(num_tasks)]
    return pe.Environment(
        pe.TaskSet.from_records(records),
        InlineSystemPrompt(system_prompt),
        pe.Rubric([exact]),
        name="instruction",
    )
