"""What the clients built on a provider's official SDK share: one `chat` with retries, backoff
and the endpoint's adaptive limiter, secrets redacted from every recorded error, and close.

A subclass says only what differs: how to build its SDK client, how the SDK's exceptions map
onto the shared failure classes, the request body, and one attempt (`wire` converts the bodies).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import ModuleType
from typing import Any

from prime_env.clients.base import ChatResponse, Message, SamplingArgs, ToolSpec
from prime_env.clients.retry import (
    AdaptiveLimiter,
    Failure,
    RetryPolicy,
    call_with_retries,
    classify_common,
    limiter_for,
    redact,
    status_failure,
)


def classify_sdk_error(exc: BaseException, sdk: ModuleType) -> Failure:
    """Map an exception of `sdk` (openai or anthropic: their SDKs are generated alike and name
    their exceptions alike) onto the shared failure classes."""
    common = classify_common(exc)
    if common is not None:
        return common
    if isinstance(exc, sdk.APITimeoutError):
        return Failure("timeout", "the request timed out", retryable=True)
    if isinstance(exc, sdk.APIConnectionError):
        return Failure("connection_error", f"connection failed: {exc}", retryable=True)
    if isinstance(exc, sdk.APIStatusError):
        return status_failure(exc.status_code, exc.message, exc.response.headers.get("retry-after"))
    if isinstance(exc, sdk.APIResponseValidationError):
        return Failure("malformed_response", str(exc), retryable=True)
    return Failure(type(exc).__name__, str(exc), retryable=False)


class SDKClient(ABC):
    """A `ModelClient` over a provider SDK's async client (`self._client`)."""

    default_provider: str
    """What `provider` names when none is given (the SDK's own service)."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        provider: str | None = None,
        stream: bool = False,
        policy: RetryPolicy | None = None,
        limiter: AdaptiveLimiter | None = None,
    ) -> None:
        self.model = model
        self.provider = provider or self.default_provider
        self.stream = stream
        self.policy = policy or RetryPolicy()
        # A placeholder key for keyless self-hosted endpoints (vLLM and most others ignore it).
        self._client = self._make_client(base_url, api_key or "EMPTY")
        self.base_url: str | None = str(self._client.base_url).rstrip("/")
        self.limiter = limiter or limiter_for(self.base_url or "")
        self._secret = api_key

    @abstractmethod
    def _make_client(self, base_url: str | None, api_key: str) -> Any:
        """The SDK's async client, with its own retries off (`call_with_retries` does them)."""

    @staticmethod
    @abstractmethod
    def classify(exc: BaseException) -> Failure:
        """Map the SDK's exceptions onto the shared failure classes."""

    @abstractmethod
    def _request(
        self, messages: list[Message], tools: list[ToolSpec] | None, sampling: SamplingArgs
    ) -> dict[str, Any]:
        """The request body for one call."""

    @abstractmethod
    async def _attempt(self, request: dict[str, Any]) -> ChatResponse:
        """Send `request` once and convert the reply."""

    def _redact(self, text: str) -> str:
        return redact(text, self._secret)

    async def chat(
        self,
        messages: list[Message],
        *,
        tools: list[ToolSpec] | None = None,
        sampling: SamplingArgs | None = None,
    ) -> ChatResponse:
        request = self._request(messages, tools, sampling or SamplingArgs())
        return await call_with_retries(
            lambda: self._attempt(request), self.classify, self.policy, self.limiter, self._redact
        )

    async def aclose(self) -> None:
        await self._client.close()
