"""The contract between the rollout runner and every model provider.

Messages are OpenAI chat-completions dicts everywhere in prime_env (the lingua franca
of verifiers, vLLM and most providers); a client for another wire format (Anthropic
Messages, a local transformers model) converts at its own edge, so harnesses and
rubrics never see provider differences.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

Message = dict[str, Any]
"""An OpenAI-style chat message: {"role", "content", optional "tool_calls"/"tool_call_id"/"name"}."""

ToolSpec = dict[str, Any]
"""An OpenAI-style tool: {"type": "function", "function": {"name", "description", "parameters"}}."""


@dataclass(frozen=True)
class SamplingArgs:
    """Sampling settings shared by all providers; `extra` passes provider-specific keys through."""

    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: list[str] | None = None
    seed: int | None = None
    logprobs: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass(frozen=True)
class ChatResponse:
    """One assistant turn. Token ids and logprobs are filled in when the server returns them."""

    message: Message
    finish_reason: str | None
    usage: Usage
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    completion_logprobs: list[float] | None = None
    policy_version: int | None = None
    """The trained policy that sampled this turn (set by `prime train`'s backends)."""
    model: str | None = None
    """The model that answered, as the server names it (the API's `model` field): an alias
    or a moving name such as `gpt-4.1-mini` is served by a dated snapshot."""


@runtime_checkable
class ModelClient(Protocol):
    """A chat model behind some wire format. Implementations retry transient failures themselves."""

    model: str
    provider: str
    base_url: str | None

    async def chat(
        self,
        messages: list[Message],
        *,
        tools: list[ToolSpec] | None = None,
        sampling: SamplingArgs | None = None,
    ) -> ChatResponse:
        """Return the next assistant message, or raise ModelError once retries are exhausted."""
        ...

    async def aclose(self) -> None:
        """Release connections and any local model resources."""
        ...


@runtime_checkable
class TokenClient(Protocol):
    """A client that also samples from given prompt token ids (the local model, the trainer's
    torch backend), so a later turn can continue an earlier one token for token
    (prime_env.trace_graph)."""

    def bridge(
        self, completion_ids: list[int], messages: list[Message], tools: list[ToolSpec] | None
    ) -> list[int] | None:
        """The tokens that follow a sampled completion when `messages` come next (the chat
        template's rendering of them), or None when that cannot be proved."""
        ...

    async def chat_ids(
        self,
        prompt_ids: list[int],
        messages: list[Message],
        *,
        tools: list[ToolSpec] | None = None,
        sampling: SamplingArgs | None = None,
    ) -> ChatResponse:
        """`chat` with the prompt given as token ids (`messages` are what they render)."""
        ...


class RenderingClient(ABC):
    """A `TokenClient` that renders chats to prompt ids itself (prime_env.chat_template) and
    samples from ids (the vLLM and Lab backends): `chat` is `chat_ids` over its own rendering,
    so a first turn and a continued one reach the model the same way."""

    model: str
    provider: str
    base_url: str | None

    async def chat(
        self,
        messages: list[Message],
        *,
        tools: list[ToolSpec] | None = None,
        sampling: SamplingArgs | None = None,
    ) -> ChatResponse:
        prompt = await self.render(messages, tools)
        return await self.chat_ids(prompt, messages, tools=tools, sampling=sampling)

    async def chat_ids(
        self,
        prompt_ids: list[int],
        messages: list[Message],
        *,
        tools: list[ToolSpec] | None = None,
        sampling: SamplingArgs | None = None,
    ) -> ChatResponse:
        return await self.sample(list(prompt_ids), tools, sampling or SamplingArgs())

    @abstractmethod
    async def render(self, messages: list[Message], tools: list[ToolSpec] | None) -> list[int]:
        """The prompt ids `messages` (and `tools`) render to."""

    @abstractmethod
    async def sample(
        self, prompt_ids: list[int], tools: list[ToolSpec] | None, sampling: SamplingArgs
    ) -> ChatResponse:
        """One completion of `prompt_ids`; `tools` tell how to parse tool calls from it."""

    @abstractmethod
    def bridge(
        self, completion_ids: list[int], messages: list[Message], tools: list[ToolSpec] | None
    ) -> list[int] | None:
        """As `TokenClient.bridge`."""

    async def aclose(self) -> None:
        """Release connections; a client over a backend's connections has none of its own."""
