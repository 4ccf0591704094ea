"""tool_env with its tools served by an MCP server (mcp_calc_server.py), for the fake providers.

The fake model turns `call: add {...}` into a tool call and then answers with the tool's
result, so the whole MCP path (tool schemas out in the provider's format, the call in, the
server's result back as a tool message) scores 1.0. `vowels` (weight 0.1) gives a random-init
model's rollouts different rewards, so a training step has groups to learn from.
"""

from __future__ import annotations

import sys
from pathlib import Path

import prime_env as pe

SERVER = str(Path(__file__).with_name("mcp_calc_server.py"))


async def correct(completion: list[dict], answer: str) -> float:
    return 1.0 if (pe.last_assistant_text(completion) or "").strip() == answer else 0.0


def vowels(completion: list[dict]) -> float:
    letters = [c for c in (pe.last_assistant_text(completion) or "").lower() if c.isalpha()]
    return sum(c in "aeiou" for c in letters) / len(letters) if letters else 0.0


def load_environment(
    num_tasks: int = 10,
    url: str | None = None,
    shared: bool = True,
    tool: str = "add",
    timeout: float = 60.0,
) -> pe.Environment:
    """`url`: a running streamable-HTTP server instead of a stdio subprocess; `tool`: which
    tool the tasks ask for (`crash` and `hang` break the server)."""
    records = [
        {
            "prompt": f'call: {tool} {{"a": {i}, "b": 1}}' if tool == "add" else f"call: {tool}",
            "answer": str(i + 1),
            "id": f"{tool}{i}",
        }
        for i in range(num_tasks)
    ]
    source = (
        pe.MCPTools(url=url, shared=shared, timeout=timeout)
        if url
        else pe.MCPTools([sys.executable, SERVER], shared=shared, timeout=timeout)
    )
    return pe.Environment(
        pe.TaskSet.from_records(records),
        pe.ToolLoop(mcp=[source], max_turns=3),
        pe.Rubric([correct, vowels], weights=[1.0, 0.1]),
        name="mcp-adder",
    )
