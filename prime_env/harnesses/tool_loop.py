"""The model calls Python tools until it answers without a tool call.

Tool failures (unknown tool, bad JSON, invalid arguments, an exception inside the tool) are
part of the task: they go back to the model as tool messages. Only an `InfraError` (a sandbox
that died, say) escapes and makes the rollout an error record.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any

from ..clients.base import ModelClient, SamplingArgs
from ..errors import infra_error_type
from ..state import State
from ..tools import Tool, ToolCallError
from .base import COMPLETED, LENGTH, Harness, Hook


class ToolLoop(Harness):
    """`tools` are plain sync or async functions. A parameter named `state` receives the rollout
    state, and parameters listed in `hidden` are filled from `state.tool_args` (set them in the
    `setup` hook); neither appears in the schema the model sees."""

    def __init__(
        self,
        tools: Sequence[Callable[..., Any]],
        max_turns: int = 10,
        system_prompt: str | None = None,
        *,
        hidden: Collection[str] = (),
        max_tokens_total: int | None = None,
        timeout: float | None = None,
        setup: Hook | None = None,
        cleanup: Hook | None = None,
    ) -> None:
        super().__init__(
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

    async def run(self, client: ModelClient, state: State, sampling: SamplingArgs) -> None:
        while True:
            response = await self.generate(client, state, sampling, tools=self.tool_specs or None)
            calls = response.message.get("tool_calls") or []
            if not calls:
                state.stop_reason = LENGTH if response.finish_reason == "length" else COMPLETED
                return
            for call in calls:
                state.completion.append(await self._run_call(call, state))
            stop = self.limit_reached(state)
            if stop is not None:
                state.stop_reason = stop
                return

    async def _run_call(self, call: dict[str, Any], state: State) -> dict[str, Any]:
        function = call.get("function") or {}
        name = function.get("name", "")
        tool = self.tools.get(name)
        try:
            if tool is None:
                raise ToolCallError(f"unknown tool {name!r}; available: {sorted(self.tools)}")
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
