"""The Program harness: a real subprocess agent using the openai SDK through the interception endpoint."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from prime_env import ChatResponse, Environment, ModelError, Program, Rubric, Usage, run_rollouts

from .scripted import ScriptedClient, tool_call

AGENT = str(Path(__file__).parent / "agents" / "calc_agent.py")
TASKS = [{"question": "What is 6*7?", "answer": "42", "secret_hint": "not for the agent"}]


def calc_then_answer(messages, tools):
    """Model script: call calc, then answer with the tool result."""
    if messages[-1]["role"] == "tool":
        return ChatResponse(
            {"role": "assistant", "content": f"The answer is {messages[-1]['content']}"},
            "stop",
            Usage(20, 6),
            [1, 2],
            [3, 4],
            [-0.5, -0.25],
        )
    assert tools and tools[0]["function"]["name"] == "calc"
    return ChatResponse(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [tool_call("calc", '{"expr": "6*7"}', "call_9")],
        },
        "tool_calls",
        Usage(15, 8),
        [1],
        [2],
        [-0.1],
    )


def correct(state, answer):
    return answer in state["stdout"]


@pytest.mark.parametrize("stream", [False, True])
async def test_program_agent_calls_are_recorded(stream: bool) -> None:
    cmd = [sys.executable, AGENT] + (["--stream"] if stream else [])
    env = Environment(TASKS, Program(cmd, timeout=60), Rubric([correct]))
    client = ScriptedClient(calc_then_answer)
    [rec] = await run_rollouts(env, client)
    assert rec.error is None, rec.error
    assert rec.reward == 1.0 and rec.stop_reason == "completed"
    roles = [m["role"] for m in rec.completion]
    assert roles == ["assistant", "tool", "assistant"]
    assert rec.completion[1] == {"role": "tool", "tool_call_id": "call_9", "content": "42"}
    assert rec.completion[2]["content"] == "The answer is 42"
    assert rec.usage.prompt_tokens == 35 and rec.usage.completion_tokens == 14
    assert [t.completion_token_ids for t in rec.turns] == [[2], [3, 4]]
    # the model saw the agent's real conversation, and the answer never reached the agent
    assert client.calls[1]["messages"][-1]["content"] == "42"
    assert "42" not in str(client.calls[0]["messages"])


async def test_program_turn_limit_kills_the_agent() -> None:
    env = Environment(
        TASKS,
        Program([sys.executable, AGENT, "--calls", "100"], max_turns=3, timeout=60),
        Rubric([lambda completion: 1.0]),
    )
    client = ScriptedClient(
        lambda m, t: {
            "role": "assistant",
            "content": None,
            "tool_calls": [tool_call("calc", '{"expr": "1"}')],
        }
    )
    [rec] = await run_rollouts(env, client)
    assert rec.stop_reason == "max_turns" and len(client.calls) == 3


async def test_model_error_behind_the_program_is_an_error_record() -> None:
    env = Environment(
        TASKS, Program([sys.executable, AGENT], timeout=60), Rubric([lambda completion: 1.0])
    )
    [rec] = await run_rollouts(
        env, ScriptedClient([ModelError("server_error", "upstream 503 after retries")])
    )
    assert rec.reward is None
    assert rec.error.model_dump() == {
        "type": "server_error",
        "message": "upstream 503 after retries",
    }


async def test_program_failure_and_timeout_are_stop_reasons() -> None:
    crash = Environment(
        TASKS,
        Program([sys.executable, "-c", "import sys; sys.exit(3)"]),
        Rubric([lambda completion: 0.0]),
    )
    [rec] = await run_rollouts(crash, ScriptedClient([]))
    assert rec.stop_reason == "program_failed" and rec.reward == 0.0
    hang = Environment(
        TASKS,
        Program([sys.executable, "-c", "import time; time.sleep(60)"], timeout=0.5),
        Rubric([lambda completion: 0.0]),
    )
    [rec] = await run_rollouts(hang, ScriptedClient([]))
    assert rec.stop_reason == "timeout"


async def test_missing_program_is_an_infra_error() -> None:
    env = Environment(TASKS, Program(["/nonexistent/agent"]), Rubric([lambda completion: 0.0]))
    [rec] = await run_rollouts(env, ScriptedClient([]))
    assert rec.error.type == "program_start_failed"


async def test_interception_endpoint_requires_the_rollout_secret() -> None:
    script = (
        "import os, httpx, json;"
        "u=os.environ['OPENAI_BASE_URL'];"
        "bad=httpx.post(u+'/chat/completions', json={'messages': []}, headers={'Authorization': 'Bearer wrong'});"
        "good=httpx.get(u+'/models', headers={'Authorization': 'Bearer '+os.environ['OPENAI_API_KEY']});"
        "junk=httpx.post(u+'/chat/completions', content=b'{not json', headers={'Authorization': 'Bearer '+os.environ['OPENAI_API_KEY']});"
        "print(json.dumps([bad.status_code, good.json()['data'][0]['id'], junk.status_code, u]))"
    )
    seen = []

    def check(state):
        seen.append(json.loads(state["stdout"]))
        return 1.0

    env = Environment(TASKS, Program([sys.executable, "-c", script]), Rubric([check]))
    client = ScriptedClient([])
    [rec] = await run_rollouts(env, client)
    assert rec.error is None and client.calls == []
    [[bad, model, junk, url]] = seen
    assert (bad, model, junk) == (401, "scripted-model", 400)
    assert url.startswith("http://127.0.0.1:")


async def test_concurrent_programs_are_isolated() -> None:
    """Four agents at once: each rollout's record holds only its own conversation."""

    def per_task(messages, tools):
        n = int(messages[-1]["content"]) if messages[-1]["role"] == "tool" else None
        if n is not None:
            return {"role": "assistant", "content": f"result {n}"}
        a = messages[-1]["content"].split()[-1]
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [tool_call("calc", json.dumps({"expr": f"{a}*{a}"}), f"c{a}")],
        }

    tasks = [{"question": f"square {i}", "answer": str(i * i)} for i in range(2, 6)]

    def correct(state, answer):
        return state["stdout"].strip() == f"result {answer}"

    env = Environment(tasks, Program([sys.executable, AGENT], timeout=60), Rubric([correct]))
    records = await run_rollouts(env, ScriptedClient(per_task), concurrency=4)
    assert [r.reward for r in records] == [1.0] * 4
    for i, rec in enumerate(records, start=2):
        assert rec.completion[1]["content"] == str(i * i)
        assert rec.completion[2]["content"] == f"result {i * i}"
