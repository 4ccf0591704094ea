"""The one interface every inference backend offers the orchestrator.

The orchestrator never knows whether policies are sampled by an in-process torch model or by
N vLLM servers: it asks a backend for a `ModelClient` (prime_env's, so harnesses, tools and
rubrics run unchanged), publishes each new policy to it, and checks with a probe that the
backend really serves that policy before dispatching anything on it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, runtime_checkable

from prime_env.clients.base import ModelClient
from trainer_bridge.protocol.policy import PolicyRef


@runtime_checkable
class InferenceBackend(Protocol):
    """Samples rollouts with the newest published policy and reports which versions it serves.

    Every `ChatResponse` its client returns carries `prompt_token_ids`, `completion_token_ids`,
    `completion_logprobs` (of the tempered distribution sampled) and `policy_version`.
    """

    def client(self) -> ModelClient:
        """A prime_env model client that samples with the newest published policy."""
        ...

    async def publish(self, policy: PolicyRef) -> None:
        """Load `policy` so that requests from now on use it; raise if the backend refuses."""
        ...

    def served_versions(self) -> set[int]:
        """Policy versions currently loaded (older ones may still finish in-flight requests)."""
        ...

    async def score(self, version: int, token_ids: list[int]) -> list[float]:
        """Logprobs of token_ids[1:] given their prefixes under policy `version` (the probe)."""
        ...

    async def health(self) -> bool:
        """True when the backend answers; False (never an exception) when it does not."""
        ...

    async def close(self) -> None:
        """Stop serving and release the model or the server connections."""
        ...


BackendFactory = Callable[[], Awaitable[InferenceBackend]]
"""Starts a backend (or reconnects to one): the orchestrator calls it again to rebuild one."""
