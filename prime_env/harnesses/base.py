"""What every harness shares: prompt assembly, hooks, budgets and stop reasons.

A harness decides how the model is run on one task. Limits that apply to every harness
(turns, a completion-token budget, a wall-clock timeout) live here so each stop is recorded
the same way in `stop_reason`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from ..calling import call_user
from ..clients.base import ChatResponse, ModelClient, SamplingArgs, ToolSpec
from ..state import State, model_call
from ..tasks import Task
from ..trace_graph import sample

Hook = Callable[[State], Any | Awaitable[Any]]

# Stop reasons the SDK records; harnesses may add their own (e.g. "program_failed").
COMPLETED = "completed"  # the model (or program) finished on its own
LENGTH = "length"  # the last model turn was cut off by max_tokens
MAX_TURNS = "max_turns"
TOKEN_BUDGET = "token_budget"
TIMEOUT = "timeout"
ENV_DONE = "env_done"


class Harness:
    """Base class. Subclasses implement `run(client, state, sampling)`.

    - `system_prompt` is prepended unless the task's prompt already starts with a system message.
    - `max_turns` bounds model calls; `max_tokens_total` bounds completion tokens over all turns
      (each call's max_tokens is lowered to what is left); `timeout` (seconds) bounds the episode.
    - `setup(state)` runs before the first turn (e.g. start a sandbox and put its handle into
      `state.tool_args`), `cleanup(state)` always runs afterwards, even on errors and timeouts.
      `setup` may also be an async generator: code after its `yield` is the cleanup, so
      `async with pool.acquire() as sb: state.tool_args["sandbox"] = sb; yield` just works.
    """

    def __init__(
        self,
        *,
        system_prompt: str | None = None,
        max_turns: int | None = None,
        max_tokens_total: int | None = None,
        timeout: float | None = None,
        setup: Hook | None = None,
        cleanup: Hook | None = None,
    ) -> None:
        if max_turns is not None and max_turns < 1:
            raise ValueError("max_turns must be at least 1")
        if max_tokens_total is not None and max_tokens_total < 1:
            raise ValueError("max_tokens_total must be at least 1")
        self.system_prompt = system_prompt
        self.max_turns = max_turns
        self.max_tokens_total = max_tokens_total
        self.timeout = timeout
        self.setup_hook = setup
        self.cleanup_hook = cleanup

    def build_prompt(self, task: Task) -> list[dict[str, Any]]:
        prompt = [dict(m) for m in task.prompt]
        if self.system_prompt and not (prompt and prompt[0].get("role") == "system"):
            prompt.insert(0, {"role": "system", "content": self.system_prompt})
        return prompt

    def start(self, task: Task) -> State:
        """A fresh state for one rollout of `task` (the runner keeps it to report partial work)."""
        return State.new(task, self.build_prompt(task))

    async def rollout(
        self, client: ModelClient, task: Task, sampling: SamplingArgs | None = None
    ) -> State:
        """Run one episode of `task` and return its state."""
        state = self.start(task)
        await self.execute(client, state, sampling)
        return state

    async def execute(
        self, client: ModelClient, state: State, sampling: SamplingArgs | None = None
    ) -> None:
        """Run hooks and the episode on `state`. ModelError/InfraError propagate: the runner
        turns them into error records."""
        sampling = sampling or SamplingArgs()
        if self.setup_hook is None and self.cleanup_hook is None:
            # No hooks, no exit stack: a rollout's fixed cost is paid once per reply at `-c 512`.
            await self._run_until_timeout(client, state, sampling)
        else:
            async with contextlib.AsyncExitStack() as stack:
                if self.cleanup_hook is not None:  # registered first: runs even if setup fails
                    stack.push_async_callback(call_user, self.cleanup_hook, state)
                if self.setup_hook is not None:
                    if inspect.isasyncgenfunction(self.setup_hook):
                        await stack.enter_async_context(
                            contextlib.asynccontextmanager(self.setup_hook)(state)
                        )
                    else:
                        await call_user(self.setup_hook, state)
                await self._run_until_timeout(client, state, sampling)
        if state.stop_reason is None:
            state.stop_reason = COMPLETED

    async def _run_until_timeout(
        self, client: ModelClient, state: State, sampling: SamplingArgs
    ) -> None:
        """The episode, stopped at `timeout` (stop reason `timeout`). Only this timeout is a
        stop reason: a TimeoutError from inside the episode (a tool's own) is the rollout's
        error, as any other exception is."""
        if self.timeout is None:
            await self.run(client, state, sampling)
            return
        # Not `wait_for`: on Python 3.11 it runs the episode as a task of its own, two more
        # passes of the loop per rollout at a hundred rollouts in flight.
        deadline = asyncio.timeout(self.timeout)
        try:
            async with deadline:
                await self.run(client, state, sampling)
        except TimeoutError:
            if not deadline.expired():
                raise
            state.stop_reason = TIMEOUT

    async def run(self, client: ModelClient, state: State, sampling: SamplingArgs) -> None:
        raise NotImplementedError

    # --- helpers for subclasses ----------------------------------------------------------
    def remaining_tokens(self, state: State) -> int | None:
        if self.max_tokens_total is None:
            return None
        return max(self.max_tokens_total - state.completion_tokens, 0)

    async def generate(
        self,
        client: ModelClient,
        state: State,
        sampling: SamplingArgs,
        tools: list[ToolSpec] | None = None,
    ) -> ChatResponse:
        """One model call on prompt + completion so far; the reply is appended to the state."""
        remaining = self.remaining_tokens(state)
        if remaining is not None and (
            sampling.max_tokens is None or sampling.max_tokens > remaining
        ):
            sampling = dataclasses.replace(sampling, max_tokens=remaining)
        messages = state.prompt + state.completion
        parent = new = None
        if state.responses:  # the last call, continued by the messages after its reply
            parent, new = state.responses[-1], messages[state["replies"][-1] + 1 :]
        with model_call(state, tools):
            response = await sample(client, messages, tools, sampling, parent, new)
        state.add_response(response)
        return response

    def limit_reached(self, state: State) -> str | None:
        """The stop reason if a turn or token limit is exhausted after the last call."""
        remaining = self.remaining_tokens(state)
        if remaining is not None and remaining <= 0:
            return TOKEN_BUDGET
        if self.max_turns is not None and state.num_turns >= self.max_turns:
            return MAX_TURNS
        return None
