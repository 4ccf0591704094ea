"""A minimal HTTP/1.1 server on asyncio + httptools for the fake provider servers.

Why not uvicorn/starlette: fault injection needs things ASGI cannot express (abort the TCP
connection mid-request, answer with bytes that are not valid JSON under a JSON content type,
hang until the client gives up), and the eval benchmark needs thousands of requests per second
on one core. httptools (the parser uvicorn itself uses) plus uvloop gives both.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http import HTTPStatus
from urllib.parse import urlsplit

import httptools


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class Responder:
    """Writes one response on a connection; also the hook for transport-level faults."""

    def __init__(self, transport: asyncio.Transport, keep_alive: bool) -> None:
        self._transport = transport
        self._keep_alive = keep_alive
        self.closed = False

    def _head(self, status: int, headers: dict[str, str], extra: str) -> bytes:
        lines = [_STATUS_LINES[status]]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        lines.append(extra)
        lines.append("connection: keep-alive" if self._keep_alive else "connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode()

    def send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        if self.closed:
            return
        head = self._head(status, headers or {}, f"content-length: {len(body)}")
        self._transport.write(head + body)
        if not self._keep_alive:
            self._transport.close()

    def start_stream(self, status: int, headers: dict[str, str]) -> None:
        if not self.closed:
            self._transport.write(self._head(status, headers, "transfer-encoding: chunked"))

    def write_chunk(self, data: bytes) -> None:
        if not self.closed and data:
            self._transport.write(b"%x\r\n%s\r\n" % (len(data), data))

    def end_stream(self) -> None:
        if self.closed:
            return
        self._transport.write(b"0\r\n\r\n")
        if not self._keep_alive:
            self._transport.close()

    def abort(self) -> None:
        """Drop the connection without a response (a reset, as a crashed proxy would)."""
        self.closed = True
        self._transport.abort()


Handler = Callable[[Request, Responder], Awaitable[None]]
BACKLOG = 4096  # connections waiting to be accepted: a benchmark opens hundreds at once
# Built once: the benchmark's fake answers thousands of requests a second on a shared core.
_STATUS_LINES = {s.value: f"HTTP/1.1 {s.value} {s.phrase}" for s in HTTPStatus}


class _Connection(asyncio.Protocol):
    def __init__(self, handler: Handler) -> None:
        self._handler = handler
        self._transport: asyncio.Transport | None = None
        self._parser = httptools.HttpRequestParser(self)
        self._queue: asyncio.Queue[Request | None] = asyncio.Queue()
        self._worker: asyncio.Task[None] | None = None
        self._url = b""
        self._headers: dict[str, str] = {}
        self._body: list[bytes] = []
        self._responder: Responder | None = None

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's is not a subclass
        self._worker = asyncio.get_running_loop().create_task(self._serve())

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError:
            assert self._transport is not None
            self._transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._responder is not None:
            self._responder.closed = True
        if self._worker is not None:
            self._worker.cancel()

    # httptools callbacks
    def on_message_begin(self) -> None:
        self._url, self._headers, self._body = b"", {}, []

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        request = Request(
            method=self._parser.get_method().decode(),
            path=_path(self._url),
            headers=self._headers,
            body=b"".join(self._body),
        )
        request.headers["x-keep-alive"] = "1" if self._parser.should_keep_alive() else "0"
        self._queue.put_nowait(request)

    async def _serve(self) -> None:
        assert self._transport is not None
        while True:
            request = await self._queue.get()
            if request is None:
                return
            keep_alive = request.headers.pop("x-keep-alive") == "1"
            self._responder = Responder(self._transport, keep_alive)
            try:
                await self._handler(request, self._responder)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - a bug in a fake must show as a 500, not a hang
                self._responder.send(500, f"fake server error: {exc!r}".encode())


@functools.lru_cache(maxsize=64)
def _path(url: bytes) -> str:
    return urlsplit(url.decode("latin-1")).path


async def serve(handler: Handler, host: str, port: int) -> asyncio.Server:
    """Start listening; the caller keeps the loop running."""
    loop = asyncio.get_running_loop()
    return await loop.create_server(lambda: _Connection(handler), host, port, backlog=BACKLOG)


async def wait_forever(server: asyncio.Server) -> None:
    async with server:
        with contextlib.suppress(asyncio.CancelledError):
            await server.serve_forever()
