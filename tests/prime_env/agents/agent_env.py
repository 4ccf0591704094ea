"""Environments whose harness is one of the unchanged agent programs beside this file, run in
a sandbox: the program's code and the SDKs it imports are mounted read-only (the sandbox's own
Python runs it), its model calls leave only through the interception server's socket.

`agent`: responses (openai SDK, Responses API), anthropic (anthropic SDK, streaming) or
subagent (Chat Completions, own system prompt, a subagent). Tasks use the fake providers'
directives, so a working pipeline scores 1.0; `vowels` (weight 0.1) gives a random-init
model's rollouts different rewards, so a training step has groups to learn from.
"""

from __future__ import annotations

import json
import shlex
import sysconfig
from pathlib import Path
from typing import Any

import prime_env as pe

HERE = Path(__file__).resolve().parent
SITE = sysconfig.get_paths()["purelib"]  # where this interpreter's openai/anthropic live
PROGRAMS = {
    "responses": "responses_agent.py",
    "anthropic": "anthropic_agent.py",
    "subagent": "subagent_agent.py",
}


def answer_of(state: pe.State) -> str:
    try:
        return str(json.loads(state["stdout"].strip().splitlines()[-1])["answer"])
    except (ValueError, KeyError, IndexError):
        return ""


def correct(state: pe.State, answer: str) -> float:
    """The answer's last word is the number (the subagent's main agent quotes its finding)."""
    words = answer_of(state).split()
    return 1.0 if words and words[-1] == answer else 0.0


def vowels(state: pe.State) -> float:
    letters = [c for c in answer_of(state).lower() if c.isalpha()]
    return sum(c in "aeiou" for c in letters) / len(letters) if letters else 0.0


def load_environment(
    agent: str = "responses",
    sandbox: str = "local",
    args: str = "",
    num_tasks: int = 8,
    timeout: float = 120.0,
) -> pe.Environment:
    if agent not in PROGRAMS:
        raise ValueError(f"agent must be one of {sorted(PROGRAMS)}, got {agent!r}")
    records: list[dict[str, Any]] = []
    for i in range(num_tasks):
        if agent == "subagent":
            records.append({"prompt": f"say: {i * i}", "answer": str(i * i), "id": f"sq{i}"})
        else:
            expr = json.dumps({"expr": f"{i}*{i}"})
            records.append({"prompt": f"call: calc {expr}", "answer": str(i * i), "id": f"sq{i}"})
    program = pe.Program(
        ["python3", f"/agents/{PROGRAMS[agent]}", *shlex.split(args)],
        env={"PYTHONPATH": "/deps"},
        binds={SITE: "/deps", str(HERE): "/agents"},
        sandbox=sandbox,
        timeout=timeout,
    )
    return pe.Environment(
        pe.TaskSet.from_records(records),
        program,
        pe.Rubric([correct, vowels], weights=[1.0, 0.1]),
        name=f"{agent}-agent",
    )
