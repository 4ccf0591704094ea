"""The model calls tools until it answers without a tool call.

A `MultiTurn` whose environment is the tools: each model turn's calls are run and their results
are the environment's reply; a turn without a call ends the episode. Tools are Python functions
and/or the tools of MCP servers (`mcp=[MCPTools(...)]`, mcp_tools.py). Tool failures (unknown
tool, bad JSON, invalid arguments, an exception inside the tool, an MCP `isError` result) are
part of the task: they go back to the model as tool messages. Only an `InfraError` (a sandbox
that died, an MCP server that crashed or hung) escapes and makes the rollout an error record.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any

from ..clients.base import ChatResponse, ModelClient, SamplingArgs, ToolSpec
from ..errors import infra_error_type
from ..state import State
from ..tools import Tool, ToolCallError
from .base import COMPLETED, LENGTH, Hook
from .mcp_tools import MCPConnection, MCPTools
from .multi_turn import MultiTurn

_MCP_KEY = "mcp_connections"
"""state key: tool name -> the MCP connection serving it on this rollout."""
_SPECS_KEY = "tool_specs"
"""state key: the tools offered on this rollout (the functions' and the MCP servers')."""


class ToolLoop(MultiTurn):
    """`tools` are plain sync or async functions. A parameter named `state` receives the rollout
    state, and parameters listed in `hidden` are filled from `state.tool_args` (set them in the
    `setup` hook); neither appears in the schema the model sees."""

    def __init__(
        self,
        tools: Sequence[Callable[..., Any]] = (),
        max_turns: int = 10,
        system_prompt: str | None = None,
        *,
        mcp: Sequence[MCPTools] = (),
        hidden: Collection[str] = (),
        max_tokens_total: int | None = None,
        timeout: float | None = None,
        setup: Hook | None = None,
        cleanup: Hook | None = None,
    ) -> None:
        super().__init__(
            self._run_calls,
            system_prompt=system_prompt,
            max_turns=max_turns,
            max_tokens_total=max_tokens_total,
            timeout=timeout,
            setup=setup,
            cleanup=cleanup,
        )
        hidden_names = {*hidden, "state"}
        self.tools = {t.name: t for t in (Tool(fn, hidden_names) for fn in tools)}
        if len(self.tools) != len(tools):
            raise ValueError("two tools have the same function name; tool names must be unique")
        self.tool_specs = [t.spec for t in self.tools.values()]
        self.mcp = list(mcp)
        if not self.tools and not self.mcp:
            raise ValueError("ToolLoop needs tools: Python functions and/or mcp=[MCPTools(...)]")

    def tools_for(self, state: State) -> list[ToolSpec] | None:
        specs: list[ToolSpec] | None = state.get(_SPECS_KEY, self.tool_specs)
        return specs

    async def run(self, client: ModelClient, state: State, sampling: SamplingArgs) -> None:
        if not self.mcp:
            await super().run(client, state, sampling)
            return
        own: list[MCPConnection] = []
        try:
            served: dict[str, MCPConnection] = {}
            specs = list(self.tool_specs or [])
            for source in self.mcp:
                connection = await source.connect()
                if not source.shared:
                    own.append(connection)
                for name in connection.names:
                    if name in self.tools or name in served:
                        raise ValueError(
                            f"tool {name!r} is offered twice (by {source!r} and by another "
                            "tool source); tool names must be unique"
                        )
                    served[name] = connection
                specs += connection.tools
            state[_MCP_KEY], state[_SPECS_KEY] = served, specs
            await super().run(client, state, sampling)
        finally:
            for connection in own:
                await connection.close()

    def finished(self, response: ChatResponse, state: State) -> str | None:
        if response.message.get("tool_calls"):
            return None
        return LENGTH if response.finish_reason == "length" else COMPLETED

    async def _run_calls(
        self, messages: list[dict[str, Any]], state: State
    ) -> list[dict[str, Any]]:
        """The environment's reply to a turn: one tool message per call, in order."""
        return [await self._run_call(call, state) for call in messages[-1].get("tool_calls") or []]

    async def _run_call(self, call: dict[str, Any], state: State) -> dict[str, Any]:
        function = call.get("function") or {}
        name = function.get("name", "")
        tool = self.tools.get(name)
        served: dict[str, MCPConnection] = state.get(_MCP_KEY) or {}
        try:
            if name in served:
                content = await served[name].call(name, function.get("arguments"))
            elif tool is None:
                available = sorted([*self.tools, *served])
                raise ToolCallError(f"unknown tool {name!r}; available: {available}")
            else:
                content = await tool.call(
                    function.get("arguments"), {**state.tool_args, "state": state}
                )
        except ToolCallError as exc:
            content = f"Error: {exc}"
        except Exception as exc:
            if infra_error_type(exc) is not None:
                raise  # a dead sandbox is not the model's mistake
            content = f"Error: {type(exc).__name__}: {exc}"  # the tool's own failure is feedback
        state.setdefault("tool_calls", 0)
        state["tool_calls"] += 1
        return {
            "role": "tool",
            "tool_call_id": call.get("id", ""),
            "name": name,
            "content": content,
        }
