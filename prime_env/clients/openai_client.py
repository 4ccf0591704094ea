"""OpenAI-compatible chat completions through the official `openai` SDK.

One client serves OpenAI, OpenRouter, Together, DeepSeek, Gemini's OpenAI endpoint, vLLM and any
other base URL (the bodies, vLLM's token-id extras included, are converted in `wire`).
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import openai

from prime_env.clients.base import ChatResponse, Message, SamplingArgs, ToolSpec
from prime_env.clients.retry import Failure
from prime_env.clients.sdk_client import SDKClient, classify_sdk_error
from prime_env.clients.transport.prepared_post import PreparedPost
from prime_env.clients.wire import from_openai, from_openai_stream


def classify(exc: BaseException) -> Failure:
    """Map openai SDK exceptions onto the shared failure classes."""
    if isinstance(exc, openai.APITimeoutError):
        dropped = _connection_cause(exc)
        if dropped is not None:
            return Failure("connection_error", f"connection failed: {dropped}", retryable=True)
    return classify_sdk_error(exc, openai)


def _connection_cause(exc: BaseException) -> BaseException | None:
    """The aiohttp transport reports refused and dropped connections as connect *timeouts*;
    find the real connection error in the cause chain so it is recorded as what it was."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, aiohttp.ClientConnectionError) and not isinstance(seen, TimeoutError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


class OpenAIClient(SDKClient):
    """A ModelClient for any OpenAI-compatible `/chat/completions` endpoint."""

    classify = staticmethod(classify)
    default_provider = "openai"

    def __init__(
        self, model: str, *, default_headers: dict[str, str] | None = None, **options: Any
    ) -> None:
        """`options` are SDKClient's (base_url, api_key, provider, stream, policy, limiter);
        `default_headers` go with every request."""
        self._default_headers = default_headers
        super().__init__(model, **options)
        # No timeout of its own: call_with_retries bounds every attempt (policy.timeout_s).
        self._post = PreparedPost(self._client, "/chat/completions", None)

    def _make_client(self, base_url: str | None, api_key: str) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(
            base_url=base_url,
            api_key=api_key,
            max_retries=0,
            timeout=self.policy.timeout_s,
            default_headers=self._default_headers,
            # Streamed calls: aiohttp's pool stays O(1) per request where httpx's scans every
            # pooled connection (the `aiohttp` extra is a dependency).
            http_client=openai.DefaultAioHttpClient(timeout=self.policy.timeout_s),
        )

    def _request(
        self, messages: list[Message], tools: list[ToolSpec] | None, sampling: SamplingArgs
    ) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"model": self.model, "messages": messages}
        if tools:
            kwargs["tools"] = tools
        if sampling.max_tokens is not None:
            # OpenAI's reasoning models reject max_tokens; most other servers only know it.
            key = "max_completion_tokens" if self.provider == "openai" else "max_tokens"
            kwargs[key] = sampling.max_tokens
        for name in ("temperature", "top_p", "stop", "seed"):
            value = getattr(sampling, name)
            if value is not None:
                kwargs[name] = value
        if sampling.logprobs:
            kwargs["logprobs"] = True
        kwargs.update(sampling.extra)  # provider-specific keys (e.g. vLLM's) go into the body
        if self.stream:
            kwargs["stream"] = True
            kwargs["stream_options"] = {"include_usage": True}
        return kwargs

    async def _attempt(self, request: dict[str, Any]) -> ChatResponse:
        if self.stream:
            chunks = await self._client.post(
                "/chat/completions",
                body=request,
                cast_to=object,
                stream=True,
                stream_cls=openai.AsyncStream[object],
            )
            return await from_openai_stream(chunks)
        # The request the SDK builds (URL, auth and every other header, its exceptions),
        # without rebuilding it per call: see prepared_post for why.
        return from_openai(json.loads(await self._post(request)))

    async def aclose(self) -> None:
        await self._post.aclose()
        await super().aclose()
