"""Games and user simulators: the environment answers every model turn.

`env_response(messages, state)` (sync or async) returns the environment's reply: a string
(sent as a user message), one message dict, a list of messages, or None for no reply. It ends
the episode by setting `state.done = True`; the final reply, if any, is still recorded.

This is the one model-environment loop: `ToolLoop` is a MultiTurn whose environment runs the
model's tool calls and whose episode ends on the first turn without one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ..calling import call_user
from ..clients.base import ChatResponse, ModelClient, SamplingArgs, ToolSpec
from ..state import State
from .base import ENV_DONE, Harness, Hook

EnvResponse = Callable[[list[dict[str, Any]], State], Any | Awaitable[Any]]


class MultiTurn(Harness):
    tool_specs: list[ToolSpec] | None = None
    """Tools offered to the model on every turn (ToolLoop's)."""

    def __init__(
        self,
        env_response: EnvResponse,
        max_turns: int = 10,
        system_prompt: str | None = None,
        *,
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
        self.env_response = env_response

    def finished(self, response: ChatResponse, state: State) -> str | None:
        """The stop reason when the model's turn ends the episode before the env answers; a
        game never ends on the model's say-so (None), a tool loop does (no tool call)."""
        return None

    def tools_for(self, state: State) -> list[ToolSpec] | None:
        """The tools offered on this rollout's turns (ToolLoop's include its MCP servers')."""
        return self.tool_specs

    async def run(self, client: ModelClient, state: State, sampling: SamplingArgs) -> None:
        while True:
            response = await self.generate(client, state, sampling, tools=self.tools_for(state))
            stop = self.finished(response, state)
            if stop is not None:
                state.stop_reason = stop
                return
            # The env sees every model turn, the last one included, so a game can score it.
            reply = await call_user(self.env_response, state.prompt + state.completion, state)
            state.completion.extend(_as_messages(reply))
            if state.done:
                state.stop_reason = ENV_DONE
                return
            stop = self.limit_reached(state)
            if stop is not None:
                state.stop_reason = stop
                return


def _as_messages(reply: Any) -> list[dict[str, Any]]:
    if reply is None:
        return []
    if isinstance(reply, str):
        return [{"role": "user", "content": reply}]
    if isinstance(reply, dict):
        return [reply]
    if isinstance(reply, list) and all(isinstance(m, dict) for m in reply):
        return list(reply)
    raise TypeError(
        "env_response must return a string, a message dict, a list of messages or None, "
        f"got {type(reply).__name__}"
    )
