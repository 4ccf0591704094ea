"""The interception server: one for all rollouts of a run, each told apart by its own secret.

An agent program gets `OPENAI_BASE_URL`/`OPENAI_API_KEY` and `ANTHROPIC_BASE_URL`/
`ANTHROPIC_API_KEY` pointing here, so an unchanged openai- or anthropic-SDK program works.
It speaks Chat Completions (`/v1/chat/completions`), Responses (`/v1/responses`) and Anthropic
Messages (`/v1/messages`), streaming or not, tools included; each call is forwarded to the
rollout's model client with the run's sampling settings winning, and recorded into the
rollout's trace graph (prime_env.trace_graph): every message once, every call a node.

An SDK retry (`x-stainless-retry-count` > 0 with a body identical to an earlier call's) gets
that call's answer again instead of a second model call, so nothing is recorded twice. The
server listens on 127.0.0.1 for programs on the host and on a Unix socket for programs in a
sandbox with no network (sandbox_channel.py relays their TCP calls to it).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import secrets
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from ...clients.base import ChatResponse, Message, ModelClient, SamplingArgs
from ...errors import ModelError
from ...state import State, model_call
from ...trace_graph import TraceGraph, sample
from .anthropic import AnthropicMessages
from .chat import ChatCompletions
from .dialect import BadRequest, Dialect, Request, merge_sampling, reply_message
from .responses import Responses

SOCKET_NAME = "api.sock"
_DIALECTS: dict[str, Dialect] = {
    "chat": ChatCompletions(),
    "responses": Responses(),
    "anthropic": AnthropicMessages(),
}


class LimitReached(Exception):
    """The rollout's turn or token budget is spent: the call is refused and the program stopped."""


@dataclass
class Session:
    """One rollout's side of the server: its state, client, budget and trace graph."""

    client: ModelClient
    state: State
    sampling: SamplingArgs
    check_limit: Callable[[State], str | None]
    remaining: Callable[[State], int | None]
    graph: TraceGraph = field(default_factory=TraceGraph)
    stopped: asyncio.Event = field(default_factory=asyncio.Event)
    stop_reason: str | None = None
    failure: BaseException | None = None
    calls: dict[str, asyncio.Future[ChatResponse]] = field(default_factory=dict)
    """Body digest -> the call it started: what an SDK retry of that body gets."""
    conversations: dict[str, list[Message]] = field(default_factory=dict)
    """Responses API: response id -> the conversation up to and including that reply."""
    prompt_size: int = 0

    def stop(self, reason: str | None = None, failure: BaseException | None = None) -> None:
        if reason and self.stop_reason is None:
            self.stop_reason = reason
        if failure and self.failure is None:
            self.failure = failure
        self.stopped.set()

    async def call(self, request: Request) -> ChatResponse:
        """Forward one model call and record it into the state and the trace graph."""
        limit = self.check_limit(self.state)
        if limit is not None or self.stopped.is_set():
            self.stop(limit)
            raise LimitReached(limit or self.stop_reason or "stopped")
        conversation = request.messages
        if request.previous is not None:
            if request.previous not in self.conversations:
                raise BadRequest(f"unknown previous_response_id {request.previous!r}")
            conversation = [*self.conversations[request.previous], *conversation]
        messages = [request.system, *conversation] if request.system else conversation
        graph = self.graph
        if not graph.messages:
            # The program's first request is the rollout's prompt: what it really started from.
            self.prompt_size = len(messages)
            self.state["prompt"] = [dict(m) for m in messages]
        path = graph.insert(messages)
        parent = graph.continued(path)
        before = self.state.responses[parent] if parent is not None else None
        new = graph.new_messages(path, parent) if parent is not None else None
        sampling = merge_sampling(self.sampling, request.wanted, self.remaining(self.state))
        with model_call(self.state, request.tools):
            response = await sample(self.client, messages, request.tools, sampling, before, new)
        reply = reply_message(response)
        index = graph.add_call(path, reply, parent)
        state = self.state
        state.responses.append(response)
        state["replies"].append(graph.calls[index].reply)
        state["usage"]["prompt_tokens"] += response.usage.prompt_tokens
        state["usage"]["completion_tokens"] += response.usage.completion_tokens
        state["completion"][:] = graph.messages[self.prompt_size :]
        request.options["conversation"] = [*conversation, reply]
        return response


class InterceptionServer:
    """Serves every session registered with it; `base_url` on TCP, `socket_dir` for sandboxes."""

    def __init__(self) -> None:
        self._sessions: dict[bytes, Session] = {}
        self._runner: web.AppRunner | None = None
        self.base_url = ""
        self.root_url = ""
        self.socket_dir: Path | None = None

    async def start(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        for path, dialect in (
            ("/v1/chat/completions", "chat"),
            ("/chat/completions", "chat"),
            ("/v1/responses", "responses"),
            ("/responses", "responses"),
            ("/v1/messages", "anthropic"),
        ):
            app.router.add_post(path, self._handler(dialect))
        app.router.add_get("/v1/models", self._models)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.root_url = f"http://{host}:{port}"
        self.base_url = self.root_url + "/v1"
        self.socket_dir = Path(tempfile.mkdtemp(prefix="prime-intercept-"))
        self.socket_dir.chmod(0o755)  # a sandbox's program runs under a uid of its own
        sock = self.socket_dir / SOCKET_NAME
        await web.UnixSite(self._runner, str(sock)).start()
        sock.chmod(0o777)
        shutil.copy(Path(__file__).with_name("relay.py"), self.socket_dir / "relay.py")

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self.socket_dir is not None:
            shutil.rmtree(self.socket_dir, ignore_errors=True)
            self.socket_dir = None

    def register(self, session: Session) -> str:
        """A new secret for `session`: the program's API key."""
        secret = "sk-rollout-" + secrets.token_hex(16)
        self._sessions[_digest(secret)] = session
        return secret

    def unregister(self, secret: str) -> None:
        self._sessions.pop(_digest(secret), None)

    @property
    def active(self) -> int:
        return len(self._sessions)

    def _session(self, request: web.Request) -> Session | None:
        auth = request.headers.get("Authorization", "")
        key = auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else ""
        key = key or request.headers.get("x-api-key", "")
        # Looked up by digest: the time a lookup takes says nothing about a guessed key.
        return self._sessions.get(_digest(key)) if key else None

    async def _models(self, request: web.Request) -> web.Response:
        session = self._session(request)
        if session is None:
            return _reply(_DIALECTS["chat"], 401, "invalid API key", "authentication_error")
        model = session.client.model
        return web.json_response(
            {"object": "list", "data": [{"id": model, "object": "model", "owned_by": "prime"}]}
        )

    def _handler(self, name: str) -> Callable[[web.Request], Any]:
        dialect = _DIALECTS[name]

        async def handle(request: web.Request) -> web.StreamResponse:
            session = self._session(request)
            if session is None:
                return _reply(
                    dialect, 401, "invalid API key for this server", "authentication_error"
                )
            raw = await request.read()
            try:
                body = json.loads(raw)
                if not isinstance(body, dict):
                    raise BadRequest("the body must be a JSON object")
                call = dialect.parse(body)
            except (ValueError, BadRequest) as exc:
                return _reply(dialect, 400, f"invalid request: {exc}", "invalid_request_error")
            try:
                response = await self._answer(session, call, raw, request)
            except BadRequest as exc:
                return _reply(dialect, 400, str(exc), "invalid_request_error")
            except LimitReached as exc:
                return _reply(
                    dialect, 400, f"rollout limit reached: {exc}", "invalid_request_error"
                )
            except ModelError as exc:
                session.stop(failure=exc)
                return _reply(dialect, 502, exc.message, exc.error_type)
            except Exception as exc:  # noqa: BLE001 - any failure ends the rollout as an error
                session.stop(failure=exc)
                return _reply(dialect, 500, f"{type(exc).__name__}: {exc}", "api_error")
            model = session.client.model
            if not call.stream:
                payload = dialect.render(response, call, model)
                _remember(session, call, payload)
                return web.json_response(payload)
            frames = dialect.events(response, call, model)
            _remember(session, call, None)
            stream = web.StreamResponse(
                headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
            )
            await stream.prepare(request)
            for frame in frames:
                await stream.write(frame)
            await stream.write_eof()
            return stream

        return handle

    async def _answer(
        self, session: Session, call: Request, raw: bytes, request: web.Request
    ) -> ChatResponse:
        digest = hashlib.blake2b(raw, digest_size=16).hexdigest()
        retry = request.headers.get("x-stainless-retry-count", "0")
        earlier = session.calls.get(digest)
        if earlier is not None and retry.isdigit() and int(retry) > 0:
            return await asyncio.shield(earlier)  # the same call again: answered, not re-run
        # Its own task: a program that hangs up (an SDK timeout) does not cancel the model
        # call, whose answer its retry then gets.
        future = asyncio.ensure_future(session.call(call))
        future.add_done_callback(_retrieve)
        session.calls[digest] = future
        return await asyncio.shield(future)


def _remember(session: Session, call: Request, payload: dict[str, Any] | None) -> None:
    """A Responses reply's conversation, for a later `previous_response_id`."""
    response_id = call.options.get("response_id")
    if response_id and "conversation" in call.options:
        session.conversations[response_id] = call.options["conversation"]


def _retrieve(future: asyncio.Future[ChatResponse]) -> None:
    if not future.cancelled():
        future.exception()  # read: an unawaited failure is reported through the session


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


def _reply(dialect: Dialect, status: int, message: str, kind: str) -> web.Response:
    return web.json_response(dialect.error(status, message, kind), status=status)


class SharedServer:
    """The run's one server per event loop: started for the first rollout, closed after the
    last one leaves."""

    def __init__(self) -> None:
        self._servers: dict[asyncio.AbstractEventLoop, tuple[InterceptionServer, Any]] = {}

    @contextlib.asynccontextmanager
    async def session(self, session: Session) -> AsyncIterator[tuple[InterceptionServer, str]]:
        loop = asyncio.get_running_loop()
        if loop not in self._servers:
            server = InterceptionServer()
            self._servers[loop] = (server, asyncio.ensure_future(server.start()))
        server, started = self._servers[loop]
        secret = server.register(session)  # before the wait: a session starting counts as active
        try:
            await asyncio.shield(started)
            yield server, secret
        finally:
            server.unregister(secret)
            if server.active == 0 and self._servers.get(loop, (None,))[0] is server:
                del self._servers[loop]
                await asyncio.gather(started, return_exceptions=True)
                await server.close()
