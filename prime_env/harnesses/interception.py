"""A per-rollout OpenAI-compatible endpoint on 127.0.0.1 that an agent program talks to.

Every chat-completions call is forwarded to the rollout's real ModelClient and recorded into
the rollout's state (messages, usage, token ids), so an external agent is scored, budgeted
and trained on exactly like an in-process harness. A per-rollout bearer secret keeps
concurrent rollouts from writing into each other's state.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from ..clients.base import ChatResponse, ModelClient, SamplingArgs
from ..errors import ModelError
from ..state import State

Message = dict[str, Any]


class InterceptionServer:
    """Serves POST /v1/chat/completions (streaming or not) and GET /v1/models for one rollout."""

    def __init__(
        self,
        client: ModelClient,
        state: State,
        sampling: SamplingArgs,
        check_limit: Callable[[State], str | None],
        generate: Callable[
            [list[Message], list[dict[str, Any]] | None, SamplingArgs], Awaitable[ChatResponse]
        ],
    ) -> None:
        self.client = client
        self.state = state
        self.sampling = sampling
        self.check_limit = check_limit
        self.generate = generate
        self.secret = "sk-rollout-" + secrets.token_hex(16)
        self.stopped = asyncio.Event()
        self.stop_reason: str | None = None
        self.failure: BaseException | None = None
        self._lock = asyncio.Lock()  # one model call at a time keeps the transcript ordered
        self._runner: web.AppRunner | None = None
        self.base_url = ""

    async def start(self) -> str:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.base_url = f"http://{host}:{port}/v1"
        return self.base_url

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def _stop(self, reason: str | None = None, failure: BaseException | None = None) -> None:
        if reason and self.stop_reason is None:
            self.stop_reason = reason
        if failure and self.failure is None:
            self.failure = failure
        self.stopped.set()

    def _authorized(self, request: web.Request) -> bool:
        header = request.headers.get("Authorization", "")
        return secrets.compare_digest(header, f"Bearer {self.secret}")

    async def _models(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return _error(401, "invalid API key for this rollout endpoint", "authentication_error")
        return web.json_response(
            {
                "object": "list",
                "data": [{"id": self.client.model, "object": "model", "owned_by": "prime"}],
            }
        )

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        if not self._authorized(request):
            return _error(401, "invalid API key for this rollout endpoint", "authentication_error")
        try:
            body = await request.json()
            messages = body["messages"]
            if not isinstance(messages, list):
                raise TypeError("messages must be a list")
        except (ValueError, KeyError, TypeError) as exc:
            return _error(400, f"invalid chat completions request: {exc}", "invalid_request_error")
        async with self._lock:
            limit = self.check_limit(self.state)
            if limit is not None:
                self._stop(limit)
                return _error(400, f"rollout limit reached: {limit}", "invalid_request_error")
            try:
                response = await self.generate(
                    messages, body.get("tools"), _merge(self.sampling, body)
                )
            except ModelError as exc:
                self._stop(failure=exc)
                return _error(502, exc.message, exc.error_type)
            except Exception as exc:  # noqa: BLE001 - any failure ends the rollout as an error
                self._stop(failure=exc)
                return _error(500, f"{type(exc).__name__}: {exc}", "server_error")
        if body.get("stream"):
            return await self._stream(request, response, body)
        return web.json_response(_completion(response, self.client.model))

    async def _stream(
        self, request: web.Request, response: ChatResponse, body: dict[str, Any]
    ) -> web.StreamResponse:
        stream = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await stream.prepare(request)
        full = _completion(response, self.client.model)
        message = full["choices"][0]["message"]
        delta: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
        if message.get("tool_calls"):
            delta["tool_calls"] = [{"index": i, **tc} for i, tc in enumerate(message["tool_calls"])]
        base = {
            "id": full["id"],
            "object": "chat.completion.chunk",
            "created": full["created"],
            "model": full["model"],
        }
        chunks = [
            {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
            {
                **base,
                "choices": [
                    {"index": 0, "delta": {}, "finish_reason": full["choices"][0]["finish_reason"]}
                ],
            },
        ]
        if (body.get("stream_options") or {}).get("include_usage"):
            chunks.append({**base, "choices": [], "usage": full["usage"]})
        for chunk in chunks:
            await stream.write(f"data: {json.dumps(chunk)}\n\n".encode())
        await stream.write(b"data: [DONE]\n\n")
        await stream.write_eof()
        return stream


def _merge(base: SamplingArgs, body: dict[str, Any]) -> SamplingArgs:
    """The run's sampling settings win; the program's fill in what the run left open."""
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
    if base.max_tokens is not None:
        max_tokens = min(base.max_tokens, max_tokens) if max_tokens else base.max_tokens
    stop = body.get("stop")
    return SamplingArgs(
        max_tokens=max_tokens,
        temperature=base.temperature if base.temperature is not None else body.get("temperature"),
        top_p=base.top_p if base.top_p is not None else body.get("top_p"),
        stop=base.stop if base.stop is not None else ([stop] if isinstance(stop, str) else stop),
        seed=base.seed if base.seed is not None else body.get("seed"),
        logprobs=base.logprobs or bool(body.get("logprobs")),
        extra=base.extra,
    )


def _completion(response: ChatResponse, model: str) -> dict[str, Any]:
    message = dict(response.message)
    message["role"] = "assistant"
    message.setdefault("content", None)
    if message.get("tool_calls"):
        message["tool_calls"] = [{"type": "function", **tc} for tc in message["tool_calls"]]
    usage = response.usage
    return {
        "id": "chatcmpl-" + secrets.token_hex(12),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": response.finish_reason or "stop",
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.prompt_tokens + usage.completion_tokens,
        },
    }


def _error(status: int, message: str, error_type: str) -> web.Response:
    return web.json_response(
        {"error": {"message": message, "type": error_type, "code": status}}, status=status
    )
