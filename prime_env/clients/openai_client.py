"""OpenAI-compatible chat completions through the official `openai` SDK.

One client serves OpenAI, OpenRouter, Together, DeepSeek, Gemini's OpenAI endpoint, vLLM and any
other base URL. vLLM extras are read when present: `prompt_token_ids` / per-choice `token_ids`
(`return_token_ids`), and logprob tokens spelled `token_id:N` (`return_tokens_as_token_ids`),
so training gets exact token ids without retokenising.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import openai

from prime_env.clients.base import ChatResponse, Message, SamplingArgs, ToolSpec, Usage
from prime_env.clients.prepared_post import PreparedPost
from prime_env.clients.retry import (
    AdaptiveLimiter,
    Failure,
    MalformedResponse,
    RetryPolicy,
    call_with_retries,
    classify_common,
    limiter_for,
    redact,
    status_failure,
)


def classify(exc: BaseException) -> Failure:
    """Map openai SDK exceptions onto the shared failure classes."""
    common = classify_common(exc)
    if common is not None:
        return common
    if isinstance(exc, openai.APITimeoutError):
        dropped = _connection_cause(exc)
        if dropped is not None:
            return Failure("connection_error", f"connection failed: {dropped}", retryable=True)
        return Failure("timeout", "the request timed out", retryable=True)
    if isinstance(exc, openai.APIConnectionError):
        return Failure("connection_error", f"connection failed: {exc}", retryable=True)
    if isinstance(exc, openai.APIStatusError):
        return status_failure(exc.status_code, exc.message, exc.response.headers.get("retry-after"))
    if isinstance(exc, openai.APIResponseValidationError):
        return Failure("malformed_response", str(exc), retryable=True)
    return Failure(type(exc).__name__, str(exc), retryable=False)


def _connection_cause(exc: BaseException) -> BaseException | None:
    """The aiohttp transport reports refused and dropped connections as connect *timeouts*;
    find the real connection error in the cause chain so it is recorded as what it was."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, aiohttp.ClientConnectionError) and not isinstance(seen, TimeoutError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


class OpenAIClient:
    """A ModelClient for any OpenAI-compatible `/chat/completions` endpoint."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        provider: str = "openai",
        stream: bool = False,
        policy: RetryPolicy | None = None,
        limiter: AdaptiveLimiter | None = None,
        default_headers: dict[str, str] | None = None,
    ) -> None:
        self.model = model
        self.provider = provider
        self.policy = policy or RetryPolicy()
        self._client = openai.AsyncOpenAI(
            base_url=base_url,
            api_key=api_key or "EMPTY",  # vLLM and most self-hosted servers ignore the key
            max_retries=0,
            timeout=self.policy.timeout_s,
            default_headers=default_headers,
            # Streamed calls: aiohttp's pool stays O(1) per request where httpx's scans every
            # pooled connection (the `aiohttp` extra is a dependency).
            http_client=openai.DefaultAioHttpClient(timeout=self.policy.timeout_s),
        )
        self.base_url: str | None = str(self._client.base_url).rstrip("/")
        self.stream = stream
        self._post = PreparedPost(self._client, "/chat/completions", self.policy.timeout_s)
        self.limiter = limiter or limiter_for(self.base_url or "")
        self._secret = api_key

    def _redact(self, text: str) -> str:
        return redact(text, self._secret)

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

    async def chat(
        self,
        messages: list[Message],
        *,
        tools: list[ToolSpec] | None = None,
        sampling: SamplingArgs | None = None,
    ) -> ChatResponse:
        request = self._request(messages, tools, sampling or SamplingArgs())

        async def attempt() -> ChatResponse:
            if self.stream:
                return await self._streamed(request)
            # The request the SDK builds (URL, auth and every other header, its exceptions),
            # without rebuilding it per call: see prepared_post for the measured why.
            return _parse_completion(json.loads(await self._post(request)))

        return await call_with_retries(attempt, classify, self.policy, self.limiter, self._redact)

    async def _streamed(self, request: dict[str, Any]) -> ChatResponse:
        stream = await self._client.post(
            "/chat/completions",
            body=request,
            cast_to=object,
            stream=True,
            stream_cls=openai.AsyncStream[object],
        )
        content: list[str] = []
        reasoning: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        logprobs: list[dict[str, Any]] = []
        finish: str | None = None
        usage: dict[str, Any] = {}
        async for data in stream:
            if not isinstance(data, dict):
                raise MalformedResponse(f"stream chunk is not an object: {data!r:.200}")
            usage = data.get("usage") or usage
            for choice in data.get("choices") or []:
                delta = choice.get("delta") or {}
                content.append(delta.get("content") or "")
                reasoning.append(delta.get("reasoning_content") or "")
                for call in delta.get("tool_calls") or []:
                    slot = calls.setdefault(
                        call["index"],
                        {"id": None, "type": "function", "function": {"name": "", "arguments": ""}},
                    )
                    slot["id"] = call.get("id") or slot["id"]
                    function = call.get("function") or {}
                    slot["function"]["name"] += function.get("name") or ""
                    slot["function"]["arguments"] += function.get("arguments") or ""
                logprobs += (choice.get("logprobs") or {}).get("content") or []
                finish = choice.get("finish_reason") or finish
        if finish is None:
            raise MalformedResponse("the stream ended without a finish_reason")
        message: dict[str, Any] = {"role": "assistant", "content": "".join(content) or None}
        if calls:
            message["tool_calls"] = [calls[i] for i in sorted(calls)]
        if any(reasoning):
            message["reasoning_content"] = "".join(reasoning)
        return _parse_completion(
            {
                "choices": [
                    {
                        "message": message,
                        "finish_reason": finish,
                        "logprobs": {"content": logprobs} if logprobs else None,
                    }
                ],
                "usage": usage,
            }
        )

    async def aclose(self) -> None:
        await self._post.aclose()
        await self._client.close()


def _parse_completion(data: dict[str, Any]) -> ChatResponse:
    """Turn a chat.completion body into a ChatResponse; raise MalformedResponse if unusable."""
    choices = data.get("choices")
    if not choices or not isinstance(choices[0].get("message"), dict):
        raise MalformedResponse(f"no choices in response: {json.dumps(data)[:200]}")
    choice = choices[0]
    raw = choice["message"]
    message: Message = {"role": "assistant", "content": raw.get("content")}
    if raw.get("tool_calls"):
        message["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {
                    "name": c["function"]["name"],
                    "arguments": c["function"]["arguments"],
                },
            }
            for c in raw["tool_calls"]
        ]
    if raw.get("reasoning_content"):  # DeepSeek/GLM: must be sent back on the next turn
        message["reasoning_content"] = raw["reasoning_content"]
    usage = data.get("usage") or {}
    entries = (choice.get("logprobs") or {}).get("content") or []
    completion_ids = choice.get("token_ids")
    if (
        completion_ids is None
        and entries
        and all(str(e.get("token", "")).startswith("token_id:") for e in entries)
    ):
        completion_ids = [int(e["token"].split(":", 1)[1]) for e in entries]
    return ChatResponse(
        message=message,
        finish_reason=choice.get("finish_reason"),
        usage=Usage(
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
        ),
        prompt_token_ids=data.get("prompt_token_ids"),
        completion_token_ids=completion_ids,
        completion_logprobs=[float(e["logprob"]) for e in entries] if entries else None,
    )
