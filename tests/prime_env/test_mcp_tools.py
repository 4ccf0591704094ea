"""MCP tools: a real MCP server (stdio and streamable HTTP) behind ToolLoop, its schemas given
to real clients against the fake OpenAI and Anthropic servers, and its failures sorted: a
tool's own error goes back to the model, a crashed or hung server is an error record."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from prime_env import MCPTools, Task, ToolLoop, run_rollouts
from prime_env.clients.anthropic_client import AnthropicClient
from prime_env.clients.openai_client import OpenAIClient
from testing.envs import mcp_env
from testing.server import FakeServer
from tests.support import free_port

from .scripted import ScriptedClient, tool_call

pytestmark = pytest.mark.xdist_group("mcp")  # one worker: each server start imports the SDK
SERVER = [sys.executable, mcp_env.SERVER]
TASK = Task(prompt=[{"role": "user", "content": "divide"}], id="t")


def servers_running() -> list[int]:
    """The calc servers this test process has started and not yet stopped (read from /proc)."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (stat.parent / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue  # the process ended while it was read
        if ppid == os.getpid() and mcp_env.SERVER.encode() in cmdline:
            pids.append(int(stat.parent.name))
    return pids


def calls_then_answer(name: str, arguments: str):
    def script(messages, tools):
        if messages[-1]["role"] == "tool":
            return f"result: {messages[-1]['content']}"
        return {"role": "assistant", "content": None, "tool_calls": [tool_call(name, arguments)]}

    return script


async def test_mcp_tools_reach_the_model_and_answer() -> None:
    env = mcp_env.load_environment(num_tasks=2)
    client = ScriptedClient(calls_then_answer("add", '{"a": 2, "b": 40}'))
    records = await run_rollouts(env, client, n=2)
    assert [r.error for r in records] == [None, None]
    assert [m["content"] for m in records[0].completion if m["role"] == "tool"] == ["42"]
    names = [t["function"]["name"] for t in client.calls[0]["tools"]]
    assert names == ["add", "divide", "crash", "hang"]
    add = client.calls[0]["tools"][0]["function"]
    assert add["description"] == "Add two integers."
    assert add["parameters"]["properties"]["a"]["type"] == "integer"
    assert add["parameters"]["required"] == ["a", "b"]


async def test_a_tools_own_error_goes_back_to_the_model() -> None:
    harness = ToolLoop(mcp=[MCPTools(SERVER)], max_turns=3)
    for arguments, expected in [
        ('{"a": 1, "b": 0}', "division by zero: pick a non-zero divisor"),
        ('{"a": "x"}', "validation error"),
        ("{not json", "arguments are not valid JSON"),
    ]:
        state = await harness.rollout(ScriptedClient(calls_then_answer("divide", arguments)), TASK)
        [tool] = [m for m in state.completion if m["role"] == "tool"]
        assert tool["content"].startswith("Error: ") and expected in tool["content"], tool
        assert state.stop_reason == "completed"
    state = await harness.rollout(ScriptedClient(calls_then_answer("nope", "{}")), TASK)
    assert "unknown tool 'nope'" in state.completion[1]["content"]


@pytest.mark.parametrize(
    "tool, error_type", [("crash", "mcp_server_crashed"), ("hang", "mcp_server_timeout")]
)
async def test_a_broken_server_is_an_error_record_not_a_zero(tool: str, error_type: str) -> None:
    env = mcp_env.load_environment(num_tasks=1, tool=tool, timeout=3.0)
    client = ScriptedClient(calls_then_answer(tool, "{}"))
    [record] = await run_rollouts(env, client)
    assert record.reward is None and record.rewards == {}
    assert record.error is not None and record.error.type == error_type, record.error
    assert record.stop_reason == "error"
    assert servers_running() == [], "the broken server outlived its rollout's error"
    # the run's next rollout gets a fresh server
    ok = mcp_env.load_environment(num_tasks=1)
    ok.harness.mcp = env.harness.mcp
    [again] = await run_rollouts(ok, ScriptedClient(calls_then_answer("add", '{"a": 1, "b": 1}')))
    assert again.error is None and again.completion[1]["content"] == "2"


async def test_a_server_that_cannot_start_is_an_error_record() -> None:
    harness = ToolLoop(mcp=[MCPTools([sys.executable, "-c", "import sys; sys.exit(1)"])])
    env = mcp_env.load_environment(num_tasks=1)
    env.harness = harness
    [record] = await run_rollouts(env, ScriptedClient(["never asked"]))
    assert record.error is not None and record.error.type == "mcp_server_unavailable"


async def test_per_rollout_servers_are_started_and_stopped() -> None:
    env = mcp_env.load_environment(num_tasks=2, shared=False)
    records = await run_rollouts(
        env, ScriptedClient(calls_then_answer("add", '{"a": 1, "b": 2}')), n=2, concurrency=2
    )
    assert [r.completion[1]["content"] for r in records] == ["3", "3"]
    assert env.harness.mcp[0]._shared == {}


@pytest.fixture(scope="module")
def http_server() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen([*SERVER, "--http", str(port)], stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                httpx.get(url, timeout=2)
                break
            except httpx.TransportError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the MCP HTTP server did not start") from None
                time.sleep(0.2)
        yield url
    finally:
        proc.kill()
        proc.wait()


async def test_streamable_http_server(http_server: str) -> None:
    env = mcp_env.load_environment(num_tasks=1, url=http_server)
    [record] = await run_rollouts(
        env, ScriptedClient(calls_then_answer("add", '{"a": 20, "b": 1}'))
    )
    assert record.error is None and record.completion[1]["content"] == "21"


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_against_the_fake_providers_in_their_tool_formats(provider: str) -> None:
    """Real SDK clients: the MCP schemas go out as OpenAI `tools` / Anthropic `input_schema`,
    the fake model calls `add`, the server's result comes back, and the reward is 1.0."""
    with FakeServer(provider) as server:
        client = (
            OpenAIClient("fake", base_url=server.url, api_key="k")
            if provider == "openai"
            else AnthropicClient("fake", base_url=server.url, api_key="k")
        )
        env = mcp_env.load_environment(num_tasks=3)
        records = await run_rollouts(env, client, n=3)
        await client.aclose()
    assert [r.error for r in records] == [None] * 3
    assert [r.rewards["correct"] for r in records] == [1.0, 1.0, 1.0]
    assert [m["content"] for m in records[2].completion if m["role"] == "tool"] == ["3"]
