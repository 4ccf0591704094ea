"""A counter the agent brings to a target with the `add` MCP tool: reward 1 when it gets there
(and the episode is done), 0 for each call that does not. Its reset observation names the
target and ends with the directive the tests' fake model follows (`call: add {...}`)."""

from __future__ import annotations

from typing import Any

from fastmcp import FastMCP
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation
from openenv.core.env_server.types import Observation, State


class CounterObservation(Observation):
    prompt: str = ""


class CounterEnvironment(MCPEnvironment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        mcp = FastMCP("counter")
        self.total = 0
        self.target = 0

        @mcp.tool
        def add(n: int) -> int:
            """Add n to the counter and return the new total."""
            self.total += n
            return self.total

        super().__init__(mcp)
        self._state = State(episode_id=None, step_count=0)

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> Observation:
        self.total = 0
        self.target = 3 + (seed or 0) % 3
        self._state = State(episode_id=episode_id, step_count=0)
        return CounterObservation(
            prompt=(
                f"Bring the counter to {self.target} with the add tool.\n"
                f'call: add {{"n": {self.target}}}'
            ),
            done=False,
            reward=0.0,
        )

    async def step_async(
        self, action: Any, timeout_s: float | None = None, **kwargs: Any
    ) -> Observation:
        observation = await super().step_async(action, timeout_s=timeout_s, **kwargs)
        if isinstance(action, CallToolAction):
            self._state.step_count += 1
            observation.reward = 1.0 if self.total == self.target else 0.0
            observation.done = self.total >= self.target
        return observation

    def _step_impl(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        return Observation(done=False, reward=0.0, metadata={"error": "act with the tools"})

    @property
    def state(self) -> State:
        return self._state


app = create_app(
    CounterEnvironment,
    CallToolAction,
    CallToolObservation,
    env_name="counter",
    max_concurrent_envs=4,
)
