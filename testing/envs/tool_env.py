"""A tool-loop environment for the fake providers: the model must call `add` and report it.

The fake model turns `call: add {...}` into a tool call and then answers with the tool's
result, so a working tool pipeline (schema out, call in, tool message back) scores 1.0.
"""

from __future__ import annotations

import prime_env as pe


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first addend.
        b: The second addend.
    """
    return a + b


async def correct(completion: list[dict], answer: str) -> float:
    return 1.0 if (pe.last_assistant_text(completion) or "").strip() == answer else 0.0


def load_environment(num_tasks: int = 10) -> pe.Environment:
    records = [
        {"prompt": f'call: add {{"a": {i}, "b": 1}}', "answer": str(i + 1), "id": f"add{i}"}
        for i in range(num_tasks)
    ]
    return pe.Environment(
        pe.TaskSet.from_records(records),
        pe.ToolLoop([add], max_turns=3),
        pe.Rubric([correct]),
        name="adder",
    )
