"""Reference policies: an environment's own solver (as a Harbor task ships its oracle).

`Environment(..., reference=Reference(solve, min_reward=1.0))`. `solve(messages, state)` (sync
or async, like `MultiTurn`'s env_response) returns the next assistant turn: text, or a message
dict. With tools offered, text is read as the `local/` models' replies are (`<tool_call>`
blocks become tool calls, prime_env.chat_template), so a reference writes its calls in the
model's own wire format and its traces are SFT data for that model.

`ReferenceClient(env)` plays the policy as a ModelClient, through the environment's own
harness, tools and rubric (`prime eval run ENV -m reference`); prime_env.reference_check checks,
with no model, that it scores what the environment declares (`prime eval validate ENV`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Awaitable, Callable
from typing import Protocol

from .calling import call_user
from .chat_template import assistant_message
from .clients.base import ChatResponse, Message, SamplingArgs, ToolSpec, Usage
from .clients.model_specs import REFERENCE_MODEL
from .errors import ModelConfigError
from .state import State, current_state

Solve = Callable[[list[Message], State], str | Message | Awaitable[str | Message]]


class Reference:
    """A reference policy and the score it must reach on the environment's eval tasks:
    `min_reward` on every task, `mean_reward` on average (at least one of them)."""

    def __init__(
        self,
        solve: Solve,
        *,
        min_reward: float | None = None,
        mean_reward: float | None = None,
    ) -> None:
        if not callable(solve):
            raise TypeError(f"Reference needs a callable solve(messages, state), got {solve!r:.80}")
        for name, value in (("min_reward", min_reward), ("mean_reward", mean_reward)):
            if value is not None and not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number, got {value!r}")
        if min_reward is None and mean_reward is None:
            raise ValueError(
                "a Reference declares what it scores: pass min_reward= (every task) and/or "
                "mean_reward= (the mean over the eval tasks), so `prime eval validate` can check it"
            )
        self.solve = solve
        self.min_reward = min_reward
        self.mean_reward = mean_reward

    async def reply(
        self, messages: list[Message], state: State, tools: list[ToolSpec] | None
    ) -> Message:
        """The policy's next assistant message for this rollout (`tools`: those offered)."""
        reply = await call_user(self.solve, messages, state)
        if isinstance(reply, str):
            if not tools:
                return {"role": "assistant", "content": reply}
            turn = state.num_turns
            counter = itertools.count()
            return assistant_message(reply, lambda: f"call_{turn}_{next(counter)}")
        if isinstance(reply, dict):
            return {"role": "assistant", **reply}
        raise TypeError(
            f"the reference policy returned {type(reply).__name__}; it must return the reply "
            "text or an assistant message dict"
        )


class WithReference(Protocol):
    """What ReferenceClient needs of an Environment (it cannot import environment.py, which
    imports this module)."""

    reference: Reference | None

    @property
    def id(self) -> str: ...


class ReferenceClient:
    """The environment's reference policy as a ModelClient: no tokens, no network, no cost."""

    provider = REFERENCE_MODEL
    base_url: str | None = None

    def __init__(self, env: WithReference) -> None:
        if env.reference is None:
            raise ModelConfigError(
                f"{env.id} ships no reference policy, so -m reference has nothing to run; an "
                "environment declares one with Environment(..., reference=Reference(solve, "
                "min_reward=...))"
            )
        self.reference = env.reference
        self.model = REFERENCE_MODEL

    async def chat(
        self,
        messages: list[Message],
        *,
        tools: list[ToolSpec] | None = None,
        sampling: SamplingArgs | None = None,
    ) -> ChatResponse:
        state = current_state()
        if state is None:
            raise RuntimeError(
                "the reference policy answers rollouts run by a harness (run_rollouts, prime "
                "eval run), not direct chat calls"
            )
        message = await self.reference.reply(messages, state, tools)
        return ChatResponse(
            message=message,
            finish_reason="tool_calls" if message.get("tool_calls") else "stop",
            usage=Usage(),
        )

    async def aclose(self) -> None:
        return None
