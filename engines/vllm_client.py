"""Speaking to a vLLM server in token ids, so it sees exactly the prompts the torch engine sees.

The chat is rendered here, by the model's own tokenizer through prime_env.chat_template (the
torch engine's rendering: tool schemas written into the system prompt when the template would
drop them, tool calls parsed back from `<tool_call>` text), and sent to `/v1/completions` as
token ids. vLLM's chat endpoint would render it again with its own template, which drops tools
for SmolLM2 and re-tokenises earlier turns; here a later turn continues an earlier one token
for token (`chat_ids`, `bridge`: prime_env.trace_graph), and both engines' samples train alike.

`TokenWire` is the request/response mapping (the trainer's vLLM backend uses it per policy);
`VLLMClient` is a model client over a server `serving.py` starts (evals: `--backend vllm`);
`prompt_logprobs_of` reads a completion's prompt logprobs (the trainer's probe, the Lab's scoring).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import httpx

from local_model.client import DEFAULT_MAX_TOKENS, sampled_response
from prime_env.chat_template import bridge_ids, prompt_ids
from prime_env.clients.base import (
    ChatResponse,
    Message,
    RenderingClient,
    SamplingArgs,
    ToolSpec,
)
from prime_env.clients.retry import (
    Failure,
    RetryPolicy,
    call_with_retries,
    classify_common,
    limiter_for,
    status_failure,
)
from prime_env.errors import ModelError


def classify(exc: BaseException) -> Failure:
    """httpx failures onto the shared failure classes (prime_env.clients.retry)."""
    common = classify_common(exc)
    if common is not None:
        return common
    if isinstance(exc, httpx.HTTPStatusError):
        response = exc.response
        return status_failure(
            response.status_code, response.text[:300], response.headers.get("retry-after")
        )
    if isinstance(exc, httpx.TimeoutException):
        return Failure("timeout", "the request timed out", retryable=True)
    if isinstance(exc, httpx.TransportError):
        return Failure("connection_error", f"connection failed: {exc!r}", retryable=True)
    return Failure(type(exc).__name__, str(exc), retryable=False)


class TokenWire:
    """Chats as token ids to one server's `/completions`, and its answers as ChatResponses."""

    def __init__(self, base_url: str, tokenizer: Any, policy: RetryPolicy | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.tokenizer = tokenizer
        self.policy = policy or RetryPolicy(max_attempts=3, timeout_s=600)
        self.http = httpx.AsyncClient(base_url=self.base_url, timeout=None)

    def render(self, messages: list[Message], tools: list[ToolSpec] | None) -> list[int]:
        return prompt_ids(self.tokenizer, messages, tools)

    def bridge(
        self, completion_ids: list[int], messages: list[Message], tools: list[ToolSpec] | None
    ) -> list[int] | None:
        return bridge_ids(self.tokenizer, completion_ids, messages, tools)

    def body(self, model: str, prompt: list[int], sampling: SamplingArgs) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": model,
            "prompt": prompt,
            "max_tokens": sampling.max_tokens or DEFAULT_MAX_TOKENS,
            "temperature": 1.0 if sampling.temperature is None else sampling.temperature,
            "logprobs": 0,  # the sampled token's own logprob (processed: temperature applied)
            "return_token_ids": True,
            "top_k": -1,
            "skip_special_tokens": True,
        }
        for name in ("top_p", "stop", "seed"):
            value = getattr(sampling, name)
            if value is not None:
                body[name] = value
        body.update(sampling.extra)
        return body

    async def complete(
        self, model: str, prompt: list[int], tools: list[ToolSpec] | None, sampling: SamplingArgs
    ) -> ChatResponse:
        """Sample a completion of `prompt` as `model` (`tools`: parse tool calls from it)."""
        body = self.body(model, prompt, sampling)

        async def attempt() -> dict[str, Any]:
            response = await self.http.post("/completions", json=body)
            response.raise_for_status()
            data: dict[str, Any] = response.json()
            return data

        data = await call_with_retries(attempt, classify, self.policy, limiter_for(self.base_url))
        return self.response(data, prompt, tools, model)

    def response(
        self, data: dict[str, Any], prompt: list[int], tools: list[ToolSpec] | None, model: str
    ) -> ChatResponse:
        try:
            choice = data["choices"][0]
            text = str(choice["text"])
            ids = [int(t) for t in choice["token_ids"]]
            logprobs = [float(x) for x in choice["logprobs"]["token_logprobs"]]
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise ModelError(
                "missing_token_ids",
                f"{self.base_url} returned no token ids or logprobs ({exc!r}): a vLLM server "
                "started by `engines` returns both",
            ) from None
        finish = str(choice.get("finish_reason") or "stop")
        return sampled_response(text, prompt, ids, logprobs, finish, tools, model)

    async def aclose(self) -> None:
        await self.http.aclose()


class VLLMClient(RenderingClient):
    """A model client for `-m local/<name>|DIR [--adapter DIR]` with `--backend vllm`: the
    server for the model (and adapter) is found or started by `serving.ensure_server`, or is
    the one at `url` (a server already running, started with the flags of vllm_server.py)."""

    provider = "vllm"

    def __init__(
        self,
        model: str,
        adapter: str | None = None,
        *,
        name: str | None = None,
        url: str | None = None,
        say: Callable[[str], None] | None = None,
    ) -> None:
        self._model, self._adapter, self._say, self._url = model, adapter, say, url
        self.model = name or model
        self.base_url: str | None = None
        self._wire: TokenWire | None = None
        self._served = ""
        self._loading: asyncio.Task[None] | None = None

    async def ensure_loaded(self) -> None:
        """Start (or join) the server and load the tokenizer; both once."""
        if self._loading is None:
            self._loading = asyncio.ensure_future(self._load())
        try:
            await asyncio.shield(self._loading)
        except Exception as exc:
            raise ModelError("vllm_unavailable", f"cannot serve {self.model}: {exc}") from exc

    async def _load(self) -> None:
        from engines.serving import Served, ensure_server, load_adapter
        from local_model.models import load_tokenizer

        if self._url is None:
            server = await ensure_server(self._model, self._adapter, say=self._say)
        else:
            from engines.served_models import model_directory

            source = await asyncio.to_thread(model_directory, self._model)
            served = self._model
            if self._adapter is not None:
                served = await load_adapter(self._url, self._adapter)
            server = Served(self._url, served, source)
        tokenizer = await asyncio.to_thread(load_tokenizer, server.tokenizer_source)
        self._wire = TokenWire(server.url, tokenizer)
        self._served = server.request_model
        self.base_url = server.url

    async def render(self, messages: list[Message], tools: list[ToolSpec] | None) -> list[int]:
        await self.ensure_loaded()
        assert self._wire is not None
        return self._wire.render(messages, tools)

    async def sample(
        self, prompt_ids: list[int], tools: list[ToolSpec] | None, sampling: SamplingArgs
    ) -> ChatResponse:
        await self.ensure_loaded()
        assert self._wire is not None
        response = await self._wire.complete(self._served, prompt_ids, tools, sampling)
        return replace(response, model=self.model)

    def bridge(
        self, completion_ids: list[int], messages: list[Message], tools: list[ToolSpec] | None
    ) -> list[int] | None:
        return None if self._wire is None else self._wire.bridge(completion_ids, messages, tools)

    async def aclose(self) -> None:
        """Closes the connection; the server serves the process's other clients until
        `serving.stop_servers()` (or the process's exit)."""
        if self._wire is not None:
            await self._wire.aclose()
            self._wire = None
            self._loading = None


class VLLMAnswerError(RuntimeError):
    """A vLLM answer without what was asked of it: the server's fault, never the caller's."""


def prompt_logprobs_of(data: dict[str, Any], token_ids: list[int]) -> list[float]:
    """vLLM's `prompt_logprobs`: [None, {str(id): {"logprob": …}}, …] → logprob of each token."""
    entries = data["choices"][0].get("prompt_logprobs") or data.get("prompt_logprobs")
    if not entries or len(entries) != len(token_ids):
        raise VLLMAnswerError("the server returned no prompt_logprobs")
    values = []
    for token, entry in zip(token_ids[1:], entries[1:]):
        item = (entry or {}).get(str(token))
        if item is None:
            raise VLLMAnswerError(f"prompt_logprobs lack token {token}")
        values.append(float(item["logprob"] if isinstance(item, dict) else item))
    return values
