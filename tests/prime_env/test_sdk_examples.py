"""The complete examples of docs/sdk.md's agent sections run as written: the MCP environment
and its server, the support desk with a simulated user, the unchanged Responses-API agent in
a sandbox, and the script that reads a record's trace graph."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from prime_env import ChatResponse, Usage, load, run_rollouts
from tests.builtin_envs.policy import PolicyClient, tool_call

from .scripted import ScriptedClient

DOC = Path(__file__).resolve().parents[2] / "docs" / "sdk.md"


@pytest.fixture(scope="module")
def examples() -> dict[str, str]:
    """Each fenced python block whose first line names its file (`# name.py`)."""
    blocks = re.findall(r"```python\n# (\w+\.py)[^\n]*\n(.*?)```", DOC.read_text(), re.DOTALL)
    return {name: code for name, code in blocks}


def write(tmp_path: Path, examples: dict[str, str], *names: str) -> None:
    for name in names:
        (tmp_path / name).write_text(examples[name])


async def test_mcp_example(tmp_path: Path, examples: dict[str, str]) -> None:
    write(tmp_path, examples, "units_server.py", "units.py")
    env = load(str(tmp_path / "units.py"))

    def policy(messages: list[dict]) -> dict | str:
        if messages[-1]["role"] == "tool":
            return f"That is {float(messages[-1]['content']):g} m."
        return tool_call("convert", "c1", value=3.5, from_unit="km", to_unit="m")

    [record] = await run_rollouts(env, PolicyClient(policy))
    assert record.error is None and record.reward == 1.0, record


async def test_user_simulator_example(tmp_path: Path, examples: dict[str, str]) -> None:
    write(tmp_path, examples, "support_env.py")
    env = load(str(tmp_path / "support_env.py"))
    replies = iter(["Sorry! What is your order number?", "I'll refund order 1234 now."])
    [record] = await run_rollouts(env, PolicyClient(lambda m: next(replies)))
    assert record.error is None and record.reward == 1.0 and record.stop_reason == "env_done"
    assert [record.completion[i - len(record.prompt)]["content"] for i in record.trace.simulated][
        -1
    ] == "Thank you, that's all."


def calculator(messages, tools):
    if messages[-1]["role"] == "tool":
        return ChatResponse(
            {"role": "assistant", "content": f"It is {messages[-1]['content']}"},
            "stop", Usage(9, 3), [1, 2, 2, 7], [3, 2], [-0.1, -0.2],
        )  # fmt: skip
    return ChatResponse(
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c1", "type": "function",
                         "function": {"name": "calc", "arguments": '{"expr": "6*7"}'}}]},
        "tool_calls", Usage(5, 2), [1], [2, 2], [-0.3, -0.4],
    )  # fmt: skip


async def test_agent_program_and_trace_examples(tmp_path: Path, examples: dict[str, str]) -> None:
    write(tmp_path, examples, "agent.py", "calc_agent_env.py", "show_trace.py")
    tmp_path.chmod(0o755)  # pytest makes it 0700; the sandbox's programs run as another uid
    env = load(str(tmp_path / "calc_agent_env.py"))
    env.harness.sandbox = "local"
    [record] = await run_rollouts(env, ScriptedClient(calculator))
    assert record.error is None and record.reward == 1.0, record
    assert [m["role"] for m in record.prompt] == ["system", "user"]
    results = tmp_path / "results.jsonl"
    results.write_text(record.to_json() + "\n")
    shown = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, str(tmp_path / "show_trace.py"), str(results)],
        capture_output=True, text=True, check=True,
        env={"PYTHONPATH": str(DOC.parents[1]), "PATH": sysconfig.get_path("scripts")},
    )  # fmt: skip
    lines = shown.stdout.splitlines()
    assert lines[0].startswith("call 0: continues None, sent 2 messages")
    assert lines[1] == "call 1: continues 0, sent 4 messages, got 'It is 42'"
    assert lines[2:] == ["sample: 6 tokens, 4 trained"]  # one branch: the turns continue
    assert json.loads(results.read_text())["trace"]["calls"][1]["parent"] == 0
