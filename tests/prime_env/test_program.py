"""The Program harness: a real agent using the openai SDK, in a sandbox (local backend, Docker
once, the host when asked), its calls recorded through the interception server."""

from __future__ import annotations

import json
import sysconfig
from pathlib import Path

import pytest

from prime_env import (
    ChatResponse,
    Environment,
    ModelError,
    Program,
    Rubric,
    SamplingArgs,
    Usage,
    run_rollouts,
)
from prime_env.harnesses.program import ON_HOST_VAR
from tests.support import require

from .scripted import ScriptedClient, always_calling, tool_call

AGENTS = Path(__file__).parent / "agents"
SITE = sysconfig.get_paths()["purelib"]
TASKS = [{"question": "What is 6*7?", "answer": "42", "secret_hint": "not for the agent"}]


def program(*argv: str, sandbox: str = "local", **kw) -> Program:
    """`python3 ARGV` in a sandbox that sees the agents (/agents) and this venv's SDKs (/deps)."""
    return Program(
        ["python3", *argv],
        env={"PYTHONPATH": "/deps"},
        binds={SITE: "/deps", str(AGENTS): "/agents"},
        sandbox=sandbox,
        **kw,
    )


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
    agent = ["/agents/calc_agent.py"] + (["--stream"] if stream else [])
    env = Environment(TASKS, program(*agent, timeout=60), Rubric([correct]))
    client = ScriptedClient(calc_then_answer)
    [rec] = await run_rollouts(env, client)
    assert rec.error is None, rec.error
    assert rec.reward == 1.0 and rec.stop_reason == "completed"
    assert [m["role"] for m in rec.completion] == ["assistant", "tool", "assistant"]
    assert rec.completion[1] == {"role": "tool", "tool_call_id": "call_9", "content": "42"}
    assert rec.completion[2]["content"] == "The answer is 42"
    assert rec.usage.prompt_tokens == 35 and rec.usage.completion_tokens == 14
    assert [t.completion_token_ids for t in rec.turns] == [[2], [3, 4]]
    assert [(c.parent, c.request, c.reply) for c in rec.trace.calls] == [(None, 0, 1), (0, 2, 3)]
    assert rec.tools == client.calls[-1]["tools"] and rec.tools[0]["function"]["name"] == "calc"
    # the model saw the agent's real conversation, and the answer never reached the agent
    assert client.calls[1]["messages"][-1]["content"] == "42"
    assert "42" not in str(client.calls[0]["messages"])


async def test_program_turn_limit_kills_the_agent() -> None:
    env = Environment(
        TASKS,
        program("/agents/calc_agent.py", "--calls", "100", max_turns=3, timeout=60),
        Rubric([lambda completion: 1.0]),
    )
    client = always_calling("calc", '{"expr": "1"}')
    [rec] = await run_rollouts(env, client)
    assert rec.stop_reason == "max_turns" and len(client.calls) == 3


async def test_model_error_behind_the_program_is_an_error_record_asked_once() -> None:
    """The SDK retries the 502 (twice): the retries get the same failure, not new model calls."""
    env = Environment(
        TASKS,
        program("/agents/calc_agent.py", "--retries", "2", timeout=60),
        Rubric([lambda completion: 1.0]),
    )
    client = ScriptedClient([ModelError("server_error", "upstream 503 after retries")])
    [rec] = await run_rollouts(env, client)
    assert rec.reward is None and len(client.calls) == 1
    assert rec.error.model_dump() == {
        "type": "server_error",
        "message": "upstream 503 after retries",
    }


async def test_an_sdk_retry_is_answered_once_and_recorded_once() -> None:
    """The SDK gives up on a slow reply after 1 s and sends the same body again with
    x-stainless-retry-count: 1; it gets the first call's answer, and the model is asked once
    per turn."""
    env = Environment(
        TASKS,
        program("/agents/calc_agent.py", "--timeout", "1", "--retries", "3", timeout=60),
        Rubric([correct]),
    )
    client = ScriptedClient(calc_then_answer, delay=2.5)
    [rec] = await run_rollouts(env, client)
    assert rec.error is None and rec.reward == 1.0, rec
    assert len(client.calls) == 2 and len(rec.turns) == 2
    assert [m["role"] for m in rec.completion] == ["assistant", "tool", "assistant"]


async def test_program_failure_and_timeout_are_stop_reasons() -> None:
    crash = Environment(
        TASKS, program("-c", "import sys; sys.exit(3)"), Rubric([lambda completion: 0.0])
    )
    [rec] = await run_rollouts(crash, ScriptedClient([]))
    assert rec.stop_reason == "program_failed" and rec.reward == 0.0
    hang = Environment(
        TASKS,
        program("-c", "import time; time.sleep(60)", timeout=1.0),
        Rubric([lambda completion: 0.0]),
    )
    [rec] = await run_rollouts(hang, ScriptedClient([]))
    assert rec.stop_reason == "timeout"


@pytest.mark.parametrize("sandbox", ["local", "host"])
async def test_missing_program_is_an_infra_error(sandbox: str) -> None:
    harness = Program(["/nonexistent/agent"], sandbox=sandbox)
    env = Environment(TASKS, harness, Rubric([lambda completion: 0.0]))
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

    env = Environment(TASKS, program("-c", script), Rubric([check]))
    client = ScriptedClient([])
    [rec] = await run_rollouts(env, client)
    assert rec.error is None and client.calls == []
    [[bad, model, junk, url]] = seen
    assert (bad, model, junk) == (401, "scripted-model", 400)
    assert url.startswith("http://127.0.0.1:")  # the sandbox's relay, its only way out


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


SQUARES = [{"question": f"square {i}", "answer": str(i * i)} for i in range(2, 6)]


def says_result(state, answer):
    return state["stdout"].strip() == f"result {answer}"


async def test_concurrent_programs_share_one_server_and_are_isolated() -> None:
    """Four agents at once, one interception server: each record holds only its own calls."""
    harness = program("/agents/calc_agent.py", timeout=60)
    env = Environment(SQUARES, harness, Rubric([says_result]))
    records = await run_rollouts(env, ScriptedClient(per_task), concurrency=4)
    assert [r.reward for r in records] == [1.0] * 4
    for i, rec in enumerate(records, start=2):
        assert rec.completion[1]["content"] == str(i * i)
        assert rec.completion[2]["content"] == f"result {i * i}"
    assert harness._server._servers == {}  # closed after the last rollout


async def test_on_host_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--program-on-host` (PRIME_PROGRAM_ON_HOST=1) runs the same Program as a subprocess:
    the host's paths, the host's network."""
    monkeypatch.setenv(ON_HOST_VAR, "1")
    harness = Program(["python3", "-c", f"import os; print(os.path.exists({str(AGENTS)!r}))"])
    seen = []
    env = Environment(TASKS, harness, Rubric([lambda state: seen.append(state["stdout"]) or 1.0]))
    [rec] = await run_rollouts(env, ScriptedClient([]))
    assert rec.error is None and seen == ["True\n"]
    monkeypatch.delenv(ON_HOST_VAR)
    [rec] = await run_rollouts(env, ScriptedClient([]))
    assert seen[-1] == "False\n"  # in the sandbox the host's directories are not there


@pytest.mark.docker
async def test_program_in_a_docker_sandbox() -> None:
    from sandbox.backends.docker import docker_available, image_exists
    from sandbox.limits import DEFAULT_IMAGE

    require(docker_available() and image_exists(DEFAULT_IMAGE), "Docker and the sandbox image")
    env = Environment(
        SQUARES[:2],
        program("/agents/calc_agent.py", sandbox="docker", timeout=120),
        Rubric([says_result]),
    )
    records = await run_rollouts(env, ScriptedClient(per_task), concurrency=2)
    assert [r.error for r in records] == [None, None]
    assert [r.reward for r in records] == [1.0, 1.0]


SAMPLING_PROGRAMS = {
    "chat": (
        "from openai import OpenAI; OpenAI().chat.completions.create(model='m', "
        "messages=[{'role': 'user', 'content': 'hi'}], temperature=0.9, max_tokens=1000, "
        "top_p=0.5, seed=3)"
    ),
    "responses": (
        "from openai import OpenAI; OpenAI().responses.create(model='m', input='hi', "
        "temperature=0.9, max_output_tokens=1000, top_p=0.5)"
    ),
    "anthropic": (
        "from anthropic import Anthropic; Anthropic().messages.create(model='m', max_tokens=1000, "
        "messages=[{'role': 'user', 'content': 'hi'}], "
        "extra_body={'temperature': 0.9, 'top_p': 0.5})"
    ),
}


@pytest.mark.parametrize("dialect", sorted(SAMPLING_PROGRAMS))
async def test_the_runs_sampling_settings_win(dialect: str) -> None:
    """The run's temperature and max tokens override the program's; what the run leaves open
    (top_p, seed) the program fills in; the rollout's token budget caps max tokens further.
    (The anthropic SDK 2.x has no temperature/top_p arguments: they travel in extra_body, as
    the Messages API still reads them.)"""
    env = Environment(
        TASKS,
        program("-c", SAMPLING_PROGRAMS[dialect], max_tokens_total=40, timeout=60),
        Rubric([lambda completion: 1.0]),
    )
    client = ScriptedClient(["hello"])
    [rec] = await run_rollouts(env, client, sampling=SamplingArgs(temperature=0.2, max_tokens=50))
    assert rec.error is None and rec.stop_reason == "completed", rec
    [call] = client.calls
    sampling = call["sampling"]
    assert (sampling.temperature, sampling.max_tokens, sampling.top_p) == (0.2, 40, 0.5)
    assert sampling.seed == (3 if dialect == "chat" else None)
