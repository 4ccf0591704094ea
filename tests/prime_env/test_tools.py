"""Tool schemas from signatures/docstrings, the tool loop, tool errors and hidden arguments."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Literal

import pytest

from prime_env import (
    Environment,
    InfraError,
    ModelError,
    RolloutRecord,
    Rubric,
    Task,
    ToolLoop,
    run_rollouts,
    tool_schema,
)
from prime_env.tools import Tool, ToolCallError

from .scripted import ScriptedClient, always_calling, tool_call

TASK = Task(prompt=[{"role": "user", "content": "go"}])


def search(query: str, limit: int = 3, mode: Literal["fast", "exact"] = "fast") -> list[str]:
    """Search the wiki.

    Returns matching page titles.

    Args:
        query: words to look for
        limit: how many titles to return
        mode: matching strategy
    """
    return [f"{query}-{i}" for i in range(limit)]


def test_schema_from_signature_and_docstring() -> None:
    spec = tool_schema(search)
    fn = spec["function"]
    assert fn["name"] == "search"
    assert fn["description"] == "Search the wiki.\n\nReturns matching page titles."
    params = fn["parameters"]
    assert params["required"] == ["query"]
    assert params["properties"]["query"] == {"type": "string", "description": "words to look for"}
    assert params["properties"]["limit"]["default"] == 3
    assert params["properties"]["mode"]["enum"] == ["fast", "exact"]
    assert params["additionalProperties"] is False


def test_hidden_and_state_parameters_are_not_in_the_schema() -> None:
    def run(code: str, sandbox: object, state: dict) -> str:
        """Run code."""
        return code

    props = Tool(run, hidden={"sandbox", "state"}).spec["function"]["parameters"]["properties"]
    assert list(props) == ["code"]


async def test_invalid_arguments_raise_tool_call_error() -> None:
    tool = Tool(search)
    with pytest.raises(ToolCallError, match="not valid JSON"):
        await tool.call("{nope", {})
    with pytest.raises(ToolCallError, match="limit: Input should be a valid integer"):
        await tool.call(json.dumps({"query": "a", "limit": "many"}), {})
    with pytest.raises(ToolCallError, match="bogus: Extra inputs are not permitted"):
        await tool.call({"query": "a", "bogus": 1}, {})
    assert json.loads(await tool.call('{"query": "x", "limit": 2}', {})) == ["x-0", "x-1"]


async def test_tool_loop_feeds_errors_back_and_finishes() -> None:
    def divide(a: float, b: float) -> float:
        """Divide a by b."""
        return a / b

    async def shout(text: str) -> str:
        """Upper-case text."""
        return text.upper()

    client = ScriptedClient(
        [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    tool_call("divide", '{"a": 1, "b": 0}', "c1"),
                    tool_call("nope", "{}", "c2"),
                ],
            },
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [tool_call("shout", '{"text": "hi"}', "c3")],
            },
            "done",
        ]
    )
    harness = ToolLoop([divide, shout], max_turns=5)
    state = await harness.rollout(client, TASK)
    tool_msgs = [m for m in state.completion if m["role"] == "tool"]
    assert tool_msgs[0]["content"] == "Error: ZeroDivisionError: float division by zero"
    assert tool_msgs[0]["tool_call_id"] == "c1"
    assert tool_msgs[1]["content"].startswith(
        "Error: unknown tool 'nope'; available: ['divide', 'shout']"
    )
    assert tool_msgs[2]["content"] == "HI"
    assert state.stop_reason == "completed"
    assert state["tool_calls"] == 3
    assert [t["function"]["name"] for t in client.calls[0]["tools"]] == ["divide", "shout"]
    # the model saw the tool results on its next call
    assert client.calls[1]["messages"][-1]["content"].startswith("Error: unknown tool")


async def test_hidden_args_injected_from_setup_and_cleanup_always_runs() -> None:
    seen: list[tuple[str, object]] = []
    cleaned: list[object] = []

    class Box:
        def __init__(self) -> None:
            self.files: dict[str, str] = {}

    def write(path: str, text: str, box: Box, state: dict) -> str:
        """Write a file into the per-rollout box."""
        box.files[path] = text
        seen.append((threading.current_thread().name, box))
        state["writes"] = state.get("writes", 0) + 1
        return "ok"

    def setup(state) -> None:
        state.tool_args["box"] = Box()

    async def cleanup(state) -> None:
        cleaned.append(state.tool_args["box"])

    harness = ToolLoop([write], max_turns=2, hidden=["box"], setup=setup, cleanup=cleanup)
    assert list(harness.tool_specs[0]["function"]["parameters"]["properties"]) == ["path", "text"]
    client = always_calling("write", '{"path": "a", "text": "b"}')
    s1 = await harness.rollout(client, TASK)
    s2 = await harness.rollout(client, TASK)
    assert s1.stop_reason == "max_turns" and s1["writes"] == 2
    assert s1.tool_args["box"] is not s2.tool_args["box"]
    assert s1.tool_args["box"].files == {"a": "b"}
    assert all(
        name != threading.main_thread().name for name, _ in seen
    )  # sync tools ran off the loop
    assert cleaned == [s1.tool_args["box"], s2.tool_args["box"]]


async def _rollout_calling(run_code: Callable[[str], str]) -> RolloutRecord:
    """One rollout of a model that calls `run_code` once, in a tool loop scored 0."""
    env = Environment([{"question": "q"}], ToolLoop([run_code]), Rubric([lambda completion: 0.0]))
    client = always_calling("run_code", '{"code": "1"}')
    [record] = await run_rollouts(env, client)
    return record


async def test_infra_error_in_a_tool_makes_an_error_record_not_a_zero() -> None:
    def run_code(code: str) -> str:
        """Run code in the sandbox."""
        raise InfraError("sandbox_crashed", "container exited unexpectedly")

    record = await _rollout_calling(run_code)
    assert record.reward is None and record.rewards == {}
    assert record.error.type == "sandbox_crashed"
    assert record.stop_reason == "error"
    assert record.completion[0]["tool_calls"]  # partial transcript kept for debugging


def test_duplicate_tool_names_rejected() -> None:
    with pytest.raises(ValueError, match="same function name"):
        ToolLoop([search, search])


async def test_sandbox_error_in_a_tool_is_infrastructure() -> None:
    from sandbox.errors import SandboxUnavailable

    def run_code(code: str) -> str:
        """Run code in the sandbox."""
        raise SandboxUnavailable("docker daemon unreachable")

    record = await _rollout_calling(run_code)
    assert record.reward is None
    assert record.error.model_dump() == {
        "type": "sandbox_unavailable",
        "message": "docker daemon unreachable",
    }


async def test_async_generator_setup_wraps_the_episode_even_on_model_error() -> None:
    events: list[str] = []

    async def lease(state):
        events.append("acquire")
        state.tool_args["box"] = {"id": len(events)}
        try:
            yield
        finally:
            events.append("release")

    def peek(box: dict) -> str:
        """Show the box id."""
        return str(box["id"])

    harness = ToolLoop([peek], hidden=["box"], setup=lease)
    client = ScriptedClient(
        [
            {"role": "assistant", "content": None, "tool_calls": [tool_call("peek", "{}")]},
            "fine",
            ModelError("server_error", "boom"),
        ]
    )
    state = await harness.rollout(client, TASK)
    assert state.completion[1]["content"] == "1" and events == ["acquire", "release"]
    with pytest.raises(ModelError):
        await harness.rollout(client, TASK)
    assert events == ["acquire", "release", "acquire", "release"]


async def test_blocking_sync_tools_run_in_parallel_beyond_asyncio_default_pool() -> None:
    """32 rollouts block in a sync tool at once: asyncio's default pool (6 threads on 2 cores)
    would deadlock this barrier; our pool lets all 32 run together."""
    barrier = threading.Barrier(32, timeout=10)

    def slow_lookup(key: str) -> str:
        """Look a key up in a slow blocking service."""
        barrier.wait()
        return "ok"

    env = Environment(
        [{"question": str(i)} for i in range(32)],
        ToolLoop([slow_lookup], max_turns=1),
        Rubric([lambda completion: 1.0]),
    )
    client = always_calling("slow_lookup", '{"key": "k"}')
    records = await run_rollouts(env, client, concurrency=32)
    assert [r.completion[1]["content"] for r in records] == ["ok"] * 32
