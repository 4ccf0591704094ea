"""Keep-alive HTTP/1.1 POSTs to one plain-HTTP origin, on asyncio protocols and httptools.

Why: a run with a hundred-plus requests in flight against a local or cluster inference server
(vLLM, the trainer's sampler server, an OpenAI-compatible gateway) is bound by the client's CPU
per request, and about half of aiohttp's went to its own layers (request and response objects,
connector bookkeeping, tracing and cookie hooks). Here a request is one transport write (a head
built once per origin, its length, the body) and a reply is parsed by httptools (llhttp, the
parser uvicorn uses) straight into bytes. Rates before and after: docs/benchmarks.md, session 9.

Scope: `http://` origins without a proxy or credentials in the URL (`PreparedPost` keeps aiohttp
for TLS and proxies). What a caller sees matches aiohttp's client: a refused, reset or closed
connection and an unparsable reply raise `ConnectionError` (an `OSError`, as name resolution
failures are), a connection is reused only after a complete reply that allows it, and a request
that is cancelled or times out takes its connection with it (it never answers the next one).
"""

from __future__ import annotations

import asyncio
import time
import zlib
from urllib.parse import urlsplit

import httptools

Headers = list[tuple[bytes, bytes]]

KEEPALIVE_S = 15.0  # aiohttp's default: an idle connection older than this is not reused
_GZIP_OR_ZLIB = 32 + zlib.MAX_WBITS  # zlib detects either header


class Reply:
    """One complete HTTP response."""

    __slots__ = ("body", "headers", "status")

    def __init__(self, status: int, headers: Headers, body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body


def supports(url: str) -> bool:
    """True for the URLs `OriginPool` serves: plain http, no user info, ASCII (as the SDK's
    URLs are: it percent-encodes paths and IDNA-encodes host names)."""
    parts = urlsplit(url)
    return (
        parts.scheme == "http" and bool(parts.hostname) and parts.username is None and url.isascii()
    )


class _Connection(asyncio.Protocol):
    """One TCP connection: at most one request in flight, answered by one response."""

    def __init__(self, pool: OriginPool) -> None:
        self._pool = pool
        self._parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.waiter: asyncio.Future[Reply] | None = None
        self.idle_since = 0.0
        self._reset()

    def _reset(self) -> None:
        self._headers: Headers = []
        self._body: list[bytes] = []
        self._framed = False  # content-length or chunked: the end is not the connection's close
        self._encoding = b""
        self._started = False

    # asyncio.Protocol ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(ConnectionError(f"the server's reply is not valid HTTP/1.1: {exc}"))
            self._drop()

    def connection_lost(self, exc: Exception | None) -> None:
        self._pool._forget(self)
        if self.waiter is None or self.waiter.done():
            return
        if self._started and not self._framed:  # a reply whose end is the connection's close
            self._complete(keep=False)
            return
        why = "before replying" if not self._started else "in the middle of its reply"
        detail = f": {exc}" if exc else ""
        self._fail(ConnectionError(f"the server closed the connection {why}{detail}"))

    # httptools callbacks ---------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self.waiter is None:  # bytes nobody asked for: the connection cannot be trusted
            self._drop()

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name, value))
        lowered = name.lower()
        if lowered in (b"content-length", b"transfer-encoding"):
            self._framed = True
        elif lowered == b"content-encoding":
            self._encoding = value.strip().lower()

    def on_headers_complete(self) -> None:
        self._started = True

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        if self._parser.get_status_code() < 200:  # 100 Continue, 103 Early Hints: not the reply
            self._reset()
            return
        self._complete(keep=self._parser.should_keep_alive())

    # ---------------------------------------------------------------------------------

    def _complete(self, keep: bool) -> None:
        waiter, self.waiter = self.waiter, None
        keep = keep and waiter is not None  # the rest of a reply nobody asked for
        try:
            body = _decoded(b"".join(self._body), self._encoding)
        except (zlib.error, ValueError) as exc:
            keep = False
            if waiter is not None and not waiter.done():
                waiter.set_exception(ConnectionError(f"cannot decode the server's reply: {exc}"))
        else:
            if waiter is not None and not waiter.done():
                reply = Reply(self._parser.get_status_code(), self._headers, body)
                waiter.set_result(reply)
        self._reset()
        if keep:
            self._pool._release(self)
        else:
            self._drop()

    def _fail(self, error: Exception) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)

    def _drop(self) -> None:
        self._pool._forget(self)
        if self.transport is not None:
            self.transport.abort()


def _decoded(body: bytes, encoding: bytes) -> bytes:
    if encoding in (b"", b"identity"):
        return body
    if encoding in (b"gzip", b"x-gzip"):
        return zlib.decompress(body, _GZIP_OR_ZLIB)
    if encoding == b"deflate":  # zlib-wrapped as the RFC says, or raw as some servers send it
        try:
            return zlib.decompress(body)
        except zlib.error:
            return zlib.decompress(body, -zlib.MAX_WBITS)
    raise ValueError(f"unsupported content-encoding {encoding.decode(errors='replace')!r}")


class OriginPool:
    """POSTs to one URL over at most `limit` keep-alive connections, bound to one event loop."""

    def __init__(self, url: str, headers: Headers, limit: int) -> None:
        """`headers`: every request header but the transport's own (Host, Content-Length,
        Connection, Accept-Encoding), as raw (name, value) pairs."""
        parts = urlsplit(url)
        if not supports(url):
            raise ValueError(f"OriginPool serves plain http:// URLs without credentials: {url}")
        self._host = parts.hostname or ""
        self._port = parts.port or 80
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        host = parts.netloc.encode("ascii")
        lines = [b"POST " + target.encode("ascii") + b" HTTP/1.1", b"Host: " + host]
        lines += [name + b": " + value for name, value in headers]
        lines.append(b"Accept-Encoding: gzip, deflate")
        self._head = b"\r\n".join(lines) + b"\r\nContent-Length: "
        self._slots = asyncio.Semaphore(limit)
        self._idle: list[_Connection] = []
        self._open: set[_Connection] = set()
        self._closed = False

    async def post(self, body: bytes) -> Reply:
        """Send `body` and return the complete reply (any status)."""
        async with self._slots:
            if self._closed:  # before the call, or while it waited for a connection slot
                raise ConnectionError("this connection pool is closed")
            connection = self._idle_connection() or await self._connect()
            transport = connection.transport
            assert transport is not None  # set by connection_made
            if transport.is_closing():  # closed by the server between connecting and now
                raise ConnectionError("the server closed the connection before replying")
            waiter: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
            connection.waiter = waiter
            transport.write(b"%s%d\r\n\r\n%s" % (self._head, len(body), body))
            try:
                return await waiter
            except BaseException:
                # Cancelled, timed out or failed with the request outstanding: the connection's
                # next bytes would be this request's reply, so it goes.
                connection.waiter = None
                connection._drop()
                raise

    def _idle_connection(self) -> _Connection | None:
        now = time.monotonic()
        while self._idle:
            connection = self._idle.pop()  # the most recently used: warm, least likely closed
            transport = connection.transport
            fresh = now - connection.idle_since <= KEEPALIVE_S
            if fresh and transport is not None and not transport.is_closing():
                return connection
            connection._drop()
        return None

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        _, connection = await loop.create_connection(
            lambda: _Connection(self), self._host, self._port
        )
        self._open.add(connection)
        return connection

    def _release(self, connection: _Connection) -> None:
        if self._closed:
            connection._drop()
            return
        connection.idle_since = time.monotonic()
        self._idle.append(connection)

    def _forget(self, connection: _Connection) -> None:
        self._open.discard(connection)
        if connection in self._idle:
            self._idle.remove(connection)

    def close(self) -> None:
        """Close every connection; requests in flight fail with `ConnectionError`."""
        self._closed = True
        for connection in list(self._open):
            connection._fail(ConnectionError("this connection pool was closed"))
            connection._drop()
