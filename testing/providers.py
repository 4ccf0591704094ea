"""The wire formats of the fake providers: OpenAI chat completions and Anthropic Messages.

Both speak the real JSON shapes (tool calls, usage, logprobs, vLLM token ids, SSE streaming with
the providers' own event layouts, and the providers' own error bodies), so the official SDKs
parse them exactly as they parse the hosted APIs. Control routes under ``/_fake/`` let a test
change latency and faults at run time and read request counters.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

from testing.behaviour import FaultPlan, Reply, logprob, reply, token_id
from testing.http_server import Request, Responder

_JSON = {"content-type": "application/json"}
_SSE = {"content-type": "text/event-stream", "cache-control": "no-cache"}
_ids = itertools.count(1)
EOS_ID = 2
"""The token a /completions request generates after its echoed prompt (SmolLM2's EOS)."""


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


class FakeProvider:
    """Shared plumbing: auth, control routes, latency, fault injection."""

    def __init__(
        self,
        plan: FaultPlan,
        api_key: str | None,
        *,
        served_model: str | None = None,
        replies: list[str] | None = None,
    ) -> None:
        self.plan = plan
        self.api_key = api_key
        self.served_model = served_model
        """The name answers carry in `model` (a real server's dated snapshot); default: the
        requested name."""
        self.replies = list(replies or [])
        """Scripted answers, one per model request in arrival order, before the rules apply."""

    def served(self, body: dict[str, Any]) -> str:
        return self.served_model or str(body.get("model", "fake"))

    def reply(
        self, turns: list[tuple[str, Any]], tool_names: set[str], max_tokens: int | None
    ) -> Reply:
        """The next scripted reply if any is left, else what the fake model's rules answer."""
        if self.replies:
            text = self.replies.pop(0)
            prompt_words = " ".join(str(content) for _, content in turns).split()
            return Reply(text, None, "stop", prompt_words, text.split())
        return reply(turns, tool_names, max_tokens)

    async def __call__(self, request: Request, out: Responder) -> None:
        if request.path == "/_fake/stats":
            out.send(200, _dumps(self.plan.stats()), _JSON)
            return
        if request.path == "/_fake/arrivals":
            out.send(200, _dumps(self.plan.arrivals), _JSON)
            return
        if request.path == "/_fake/replies" and request.method == "POST":
            self.replies = [str(text) for text in json.loads(request.body)]
            out.send(200, _dumps({"replies": len(self.replies)}), _JSON)
            return
        if request.path == "/_fake/config" and request.method == "POST":
            try:
                self.plan = FaultPlan(**json.loads(request.body))
            except (TypeError, ValueError) as exc:
                out.send(400, _dumps({"error": str(exc)}), _JSON)
                return
            out.send(200, _dumps(self.plan.stats()), _JSON)
            return
        if not self.route(request):
            out.send(404, _dumps(self.error_body("not_found", f"no route {request.path}")), _JSON)
            return
        if self.api_key is not None and self.presented_key(request) != self.api_key:
            out.send(401, _dumps(self.error_body("authentication_error", "invalid api key")), _JSON)
            return
        fault = self.plan.next()
        if self.plan.latency_ms:
            await asyncio.sleep(self.plan.latency_ms / 1000)
        if fault is not None and await self.inject(fault, out):
            return
        try:
            body = json.loads(request.body)
        except ValueError:
            out.send(
                400, _dumps(self.error_body("invalid_request_error", "body is not JSON")), _JSON
            )
            return
        self.answer(body, out, malformed=fault == "malformed")

    async def inject(self, fault: str, out: Responder) -> bool:
        """Apply a fault; False means the request proceeds (malformed is applied while answering)."""
        if fault == "429":
            headers = {**_JSON, "retry-after": f"{self.plan.retry_after_s:g}"}
            out.send(429, _dumps(self.error_body("rate_limit_error", "rate limited")), headers)
        elif fault in ("500", "503"):
            out.send(int(fault), _dumps(self.error_body("api_error", "upstream failure")), _JSON)
        elif fault == "drop":
            out.abort()
        elif fault == "timeout":
            await asyncio.sleep(self.plan.hang_s)  # cancelled when the client hangs up
            out.abort()
        else:
            return False
        return True

    def route(self, request: Request) -> bool:
        raise NotImplementedError

    def presented_key(self, request: Request) -> str | None:
        raise NotImplementedError

    def error_body(self, kind: str, message: str) -> dict[str, Any]:
        raise NotImplementedError

    def answer(self, body: dict[str, Any], out: Responder, malformed: bool) -> None:
        raise NotImplementedError


PromptScorer = Callable[[list[int]], list[float]]
"""log p(ids[i] | ids[:i]) for i ≥ 1: a real model's, given by the test that starts the fake."""


class FakeOpenAI(FakeProvider):
    """POST /v1/chat/completions (also /chat/completions for base URLs without /v1), and
    /v1/completions with token-id prompts, `echo` and `logprobs` as vLLM answers them (prompt
    logprobs from `scorer`, a real model the test supplies; one token generated: EOS)."""

    def __init__(
        self,
        plan: FaultPlan,
        api_key: str | None,
        scorer: PromptScorer | None = None,
        **shared: Any,
    ) -> None:
        super().__init__(plan, api_key, **shared)  # served_model, replies
        self.scorer = scorer

    def route(self, request: Request) -> bool:
        return request.method == "POST" and request.path.endswith("/completions")

    def presented_key(self, request: Request) -> str | None:
        auth = request.headers.get("authorization", "")
        return auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else None

    def error_body(self, kind: str, message: str) -> dict[str, Any]:
        return {"error": {"message": message, "type": kind, "param": None, "code": None}}

    def answer(self, body: dict[str, Any], out: Responder, malformed: bool) -> None:
        if "prompt" in body and "messages" not in body:
            self._prompt_completion(body, out)
            return
        turns = [(m["role"], m.get("content")) for m in body.get("messages", [])]
        tools = {t["function"]["name"] for t in body.get("tools") or []}
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        rep = self.reply(turns, tools, limit)
        rid = f"chatcmpl-{next(_ids)}"
        if body.get("stream"):
            out.start_stream(200, _SSE)
            for event in self._chunks(rid, body, rep):
                out.write_chunk(b"data: " + event + b"\n\n")
            if malformed:
                out.write_chunk(b'data: {"id": "broken", "choices": [\n\n')
            out.write_chunk(b"data: [DONE]\n\n")
            out.end_stream()
            return
        payload = _dumps(self._completion(rid, body, rep))
        out.send(200, payload[: len(payload) // 2] if malformed else payload, _JSON)

    def _prompt_completion(self, body: dict[str, Any], out: Responder) -> None:
        """vLLM's /v1/completions for `prompt` = token ids with `echo`: `token_logprobs` is
        None for the first prompt token, then each prompt token's and the generated one's."""
        ids = body.get("prompt")
        if self.scorer is None or not body.get("echo") or body.get("logprobs") is None:
            message = "this fake answers /completions only with echo, logprobs and a scorer"
            out.send(400, _dumps(self.error_body("invalid_request_error", message)), _JSON)
            return
        if not isinstance(ids, list) or not ids or not all(isinstance(i, int) for i in ids):
            message = "prompt must be a non-empty list of token ids"
            out.send(400, _dumps(self.error_body("invalid_request_error", message)), _JSON)
            return
        generated = [EOS_ID] if int(body.get("max_tokens", 16)) > 0 else []
        scored = self.scorer([*ids, *generated])
        as_ids = body.get("return_tokens_as_token_ids")
        tokens = [f"token_id:{i}" if as_ids else f"<{i}>" for i in [*ids, *generated]]
        values: list[float | None] = [None, *scored]
        choice = {
            "index": 0,
            "text": "".join(tokens),
            "logprobs": {
                "text_offset": list(itertools.accumulate([0, *(len(t) for t in tokens[:-1])])),
                "token_logprobs": values,
                "tokens": tokens,
                "top_logprobs": [None if v is None else {t: v} for t, v in zip(tokens, values)],
            },
            "finish_reason": "length",
            "stop_reason": None,
            "prompt_logprobs": None,
        }
        result = {
            "id": f"cmpl-{next(_ids)}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": body.get("model", "fake"),
            "choices": [choice],
            "usage": {
                "prompt_tokens": len(ids),
                "completion_tokens": len(generated),
                "total_tokens": len(ids) + len(generated),
            },
        }
        out.send(200, _dumps(result), _JSON)

    def _message(self, rep: Reply) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": rep.text, "refusal": None}
        if rep.tool_call:
            name, args = rep.tool_call
            message["tool_calls"] = [
                {
                    "id": f"call_{next(_ids)}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)},
                }
            ]
        return message

    def _logprobs(self, body: dict[str, Any], words: list[str]) -> dict[str, Any] | None:
        if not body.get("logprobs"):
            return None
        as_ids = body.get("return_tokens_as_token_ids")
        return {
            "content": [
                {
                    "token": f"token_id:{token_id(w)}" if as_ids else w,
                    "logprob": logprob(i, w),
                    "bytes": list(w.encode()),
                    "top_logprobs": [],
                }
                for i, w in enumerate(words)
            ],
            "refusal": None,
        }

    def _usage(self, rep: Reply) -> dict[str, int]:
        p, c = len(rep.prompt_words), len(rep.completion_words)
        return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}

    def _completion(self, rid: str, body: dict[str, Any], rep: Reply) -> dict[str, Any]:
        choice: dict[str, Any] = {
            "index": 0,
            "message": self._message(rep),
            "logprobs": self._logprobs(body, rep.completion_words),
            "finish_reason": rep.finish_reason,
        }
        result: dict[str, Any] = {
            "id": rid,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.served(body),
            "choices": [choice],
            "usage": self._usage(rep),
        }
        if body.get("return_token_ids"):  # vLLM
            result["prompt_token_ids"] = [token_id(w) for w in rep.prompt_words]
            choice["token_ids"] = [token_id(w) for w in rep.completion_words]
        return result

    def _chunks(self, rid: str, body: dict[str, Any], rep: Reply) -> Iterator[bytes]:
        base = {
            "id": rid,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": self.served(body),
        }

        def chunk(delta: dict[str, Any], finish: str | None = None, lp: Any = None) -> bytes:
            return _dumps(
                {
                    **base,
                    "choices": [
                        {"index": 0, "delta": delta, "logprobs": lp, "finish_reason": finish}
                    ],
                }
            )

        yield chunk({"role": "assistant", "content": ""})
        if rep.tool_call:
            name, args = rep.tool_call
            call_id = f"call_{next(_ids)}"
            yield chunk(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": call_id,
                            "type": "function",
                            "function": {"name": name, "arguments": ""},
                        }
                    ]
                }
            )
            text = json.dumps(args)
            for start in range(0, len(text), 8):
                yield chunk(
                    {
                        "tool_calls": [
                            {"index": 0, "function": {"arguments": text[start : start + 8]}}
                        ]
                    }
                )
        else:
            for i, word in enumerate(rep.completion_words):
                lp = self._logprobs(body, [word])
                if lp is not None:
                    lp["content"][0]["logprob"] = logprob(i, word)
                yield chunk({"content": word if i == 0 else " " + word}, lp=lp)
        yield chunk({}, rep.finish_reason)
        if (body.get("stream_options") or {}).get("include_usage"):
            yield _dumps({**base, "choices": [], "usage": self._usage(rep)})


class FakeAnthropic(FakeProvider):
    """POST /v1/messages, the Anthropic Messages API."""

    def route(self, request: Request) -> bool:
        return request.method == "POST" and request.path.endswith("/v1/messages")

    def presented_key(self, request: Request) -> str | None:
        # `x-api-key` is the documented header; newer SDKs send the key as a Bearer token.
        auth = request.headers.get("authorization", "")
        return request.headers.get("x-api-key") or auth.removeprefix("Bearer ") or None

    def error_body(self, kind: str, message: str) -> dict[str, Any]:
        kind = {"api_error": "api_error", "rate_limit_error": "rate_limit_error"}.get(kind, kind)
        return {"type": "error", "error": {"type": kind, "message": message}}

    def answer(self, body: dict[str, Any], out: Responder, malformed: bool) -> None:
        turns: list[tuple[str, Any]] = []
        for m in body.get("messages", []):
            content = m.get("content")
            is_result = isinstance(content, list) and any(
                b.get("type") == "tool_result" for b in content
            )
            turns.append(("tool" if is_result else m["role"], content))
        tools = {t["name"] for t in body.get("tools") or []}
        rep = self.reply(turns, tools, body.get("max_tokens"))
        stop = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}[
            rep.finish_reason
        ]
        blocks: list[dict[str, Any]] = []
        if rep.tool_call:
            blocks.append(
                {
                    "type": "tool_use",
                    "id": f"toolu_{next(_ids)}",
                    "name": rep.tool_call[0],
                    "input": rep.tool_call[1],
                }
            )
        else:
            blocks.append({"type": "text", "text": rep.text or ""})
        message = {
            "id": f"msg_{next(_ids)}",
            "type": "message",
            "role": "assistant",
            "model": self.served(body),
            "content": blocks,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {
                "input_tokens": len(rep.prompt_words),
                "output_tokens": len(rep.completion_words),
            },
        }
        if body.get("stream"):
            out.start_stream(200, _SSE)
            for name, data in self._events(message):
                out.write_chunk(b"event: %s\ndata: %s\n\n" % (name.encode(), _dumps(data)))
                if malformed and name == "content_block_start":
                    out.write_chunk(b'event: content_block_delta\ndata: {"type": \n\n')
            out.end_stream()
            return
        payload = _dumps(message)
        out.send(200, payload[: len(payload) // 2] if malformed else payload, _JSON)

    def _events(self, message: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
        usage = message["usage"]
        start = {
            **message,
            "content": [],
            "stop_reason": None,
            "usage": {"input_tokens": usage["input_tokens"], "output_tokens": 1},
        }
        yield "message_start", {"type": "message_start", "message": start}
        for index, block in enumerate(message["content"]):
            if block["type"] == "text":
                yield (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": "text", "text": ""},
                    },
                )
                words = block["text"].split(" ")
                for i, word in enumerate(words):
                    piece = word if i == 0 else " " + word
                    yield (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "text_delta", "text": piece},
                        },
                    )
            else:
                yield (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {**block, "input": {}},
                    },
                )
                text = json.dumps(block["input"])
                for s in range(0, len(text), 8):
                    yield (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "input_json_delta", "partial_json": text[s : s + 8]},
                        },
                    )
            yield "content_block_stop", {"type": "content_block_stop", "index": index}
        yield (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        )
        yield "message_stop", {"type": "message_stop"}
