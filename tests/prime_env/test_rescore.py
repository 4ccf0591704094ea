"""Re-scoring pushed records (what the hub runs in a sandbox to verify a run): the task of each
record is the environment's own, so a record whose task was made up to fit its completion is
a mismatch, never a match; records the runner wrote score as they did."""

from __future__ import annotations

import json
from typing import Any

from prime_env import Environment, Rubric, SingleTurn, run_rollouts
from prime_env.rescore import rescore

from .scripted import ScriptedClient

TASKS = [{"question": f"{i}+{i}", "answer": str(2 * i), "id": f"t{i}"} for i in range(4)]


def exact(completion: list[dict[str, Any]], answer: str) -> float:
    return float(completion[-1]["content"] == answer)


def make_env() -> Environment:
    return Environment(TASKS, SingleTurn(system_prompt="Add."), Rubric([exact]), name="adder")


def wrong_then_right(messages: list[dict[str, Any]], tools: Any) -> str:
    a, _ = messages[-1]["content"].split("+")
    return "0" if a == "1" else str(2 * int(a))  # example 1 is answered wrong


async def pushed_records() -> list[dict[str, Any]]:
    records = await run_rollouts(make_env(), ScriptedClient(wrong_then_right), n=4, r=1)
    return [json.loads(record.to_json()) for record in records]


async def test_records_the_runner_wrote_score_as_they_did() -> None:
    records = await pushed_records()
    scores = await rescore(make_env(), records)
    assert [s["reward"] for s in scores] == [r["reward"] for r in records] == [1.0, 0.0, 1.0, 1.0]


async def test_a_task_made_up_to_fit_its_completion_is_a_mismatch() -> None:
    records = await pushed_records()
    rigged = [dict(r) for r in records]
    rigged[1]["answer"] = "0"  # the wrong answer made right by changing the task's answer
    rigged[2] = {**records[0], "example_index": 2}  # the easy example under another index
    rigged[3]["prompt"] = [{"role": "user", "content": "0+0"}]
    rigged[3]["completion"] = [{"role": "assistant", "content": "0"}]
    rigged.append({**records[0], "example_index": 9})  # no such example
    scores = await rescore(make_env(), rigged)
    assert scores[0] == {"reward": 1.0, "rewards": {"exact": 1.0}, "metrics": {}}
    assert "answer is not the environment's for example 1" in scores[1]["mismatch"]
    assert "example 2 is task t2, not t0" in scores[2]["mismatch"]
    assert "prompt is not the environment's for example 3" in scores[3]["mismatch"]
    assert "not one of the environment's 4 eval tasks" in scores[4]["mismatch"]
