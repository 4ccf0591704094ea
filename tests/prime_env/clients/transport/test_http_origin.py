"""OriginPool against a scripted HTTP server: framing, reuse, and what a broken reply does."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import pytest

from prime_env.clients.transport import http_origin
from prime_env.clients.transport.http_origin import OriginPool, supports

Script = Callable[[bytes, asyncio.StreamWriter], Awaitable[None]]


@dataclass
class Server:
    """Answers each request with what `script` writes; records requests and connections."""

    script: Script
    url: str = ""
    requests: list[bytes] = field(default_factory=list)
    connections: int = 0
    open_now: int = 0
    most_open: int = 0
    readers: dict[asyncio.StreamWriter, asyncio.StreamReader] = field(default_factory=dict)


async def _read_request(reader: asyncio.StreamReader) -> bytes | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    return head + await reader.readexactly(length)


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Script], Awaitable[Server]]]:
    servers: list[asyncio.Server] = []

    async def start(script: Script) -> Server:
        state = Server(script)

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            state.connections += 1
            state.readers[writer] = reader
            state.open_now += 1
            state.most_open = max(state.most_open, state.open_now)
            try:
                while (request := await _read_request(reader)) is not None:
                    state.requests.append(request)
                    await state.script(request, writer)
                    if writer.is_closing():
                        break
            finally:
                state.open_now -= 1
                writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        servers.append(server)
        state.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1/chat?x=1"
        return state

    yield start
    for server in servers:
        server.close()
        await server.wait_closed()


def reply(body: bytes, *headers: str, status: str = "200 OK") -> bytes:
    head = [f"HTTP/1.1 {status}", f"content-length: {len(body)}", *headers]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


async def ok(request: bytes, writer: asyncio.StreamWriter) -> None:
    writer.write(reply(b'{"n": %d}' % len(request)))


async def test_sequential_posts_share_one_connection(serve) -> None:  # type: ignore[no-untyped-def]
    server = await serve(ok)
    pool = OriginPool(server.url, [(b"Authorization", b"Bearer k")], limit=10)
    for body in (b"{}", b'{"a": 1}', b"[" + b"1," * 50_000 + b"1]"):
        answer = await pool.post(body)
        assert answer.status == 200
        assert answer.body == b'{"n": %d}' % len(server.requests[-1])
    pool.close()
    assert server.connections == 1
    head, _, body = server.requests[0].partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /v1/chat?x=1 HTTP/1.1"
    assert f"Host: {server.url.split('/')[2]}".encode() in lines
    assert b"Authorization: Bearer k" in lines
    assert b"Content-Length: 2" in lines
    assert body == b"{}"
    assert server.requests[2].endswith(b"1,1]")


async def test_chunked_gzip_reply_and_an_interim_100_continue(serve) -> None:  # type: ignore[no-untyped-def]
    packed = gzip.compress(b'{"hello": "world"}')

    async def script(_: bytes, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        head = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-encoding: gzip\r\n\r\n"
        chunks = [packed[:5], packed[5:]]
        writer.write(head + b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\n\r\n")

    server = await serve(script)
    pool = OriginPool(server.url, [], limit=10)
    assert (await pool.post(b"{}")).body == b'{"hello": "world"}'
    assert (await pool.post(b"{}")).body == b'{"hello": "world"}'
    pool.close()
    assert server.connections == 1


async def test_a_reply_ended_by_closing_the_connection(serve) -> None:  # type: ignore[no-untyped-def]
    async def script(_: bytes, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 503 Busy\r\nretry-after: 3\r\n\r\nlater")  # no length
        writer.close()

    server = await serve(script)
    pool = OriginPool(server.url, [], limit=10)
    first = await pool.post(b"{}")
    second = await pool.post(b"{}")
    pool.close()
    assert (first.status, first.body, second.body) == (503, b"later", b"later")
    assert (b"retry-after", b"3") in first.headers
    assert server.connections == 2


async def test_connection_close_is_obeyed_before_the_server_closes(serve) -> None:  # type: ignore[no-untyped-def]
    async def script(request: bytes, writer: asyncio.StreamWriter) -> None:
        writer.write(reply(b"{}", "connection: close"))  # and the socket stays open a while

    server = await serve(script)
    pool = OriginPool(server.url, [], limit=10)
    for _ in range(3):
        assert (await pool.post(b"{}")).status == 200
    pool.close()
    assert server.connections == 3


@pytest.mark.parametrize(
    "unasked",
    [reply(b"unasked"), b"HTTP/1.1 408 Request Timeout\r\n"],
    ids=["whole reply", "start of one"],
)
@pytest.mark.parametrize("same_read", [True, False])
async def test_bytes_nobody_asked_for_end_the_connection(
    serve,  # type: ignore[no-untyped-def]
    unasked: bytes,
    same_read: bool,
) -> None:
    async def script(request: bytes, writer: asyncio.StreamWriter) -> None:
        if same_read:
            writer.write(reply(b"fresh") + unasked)
            return
        writer.write(reply(b"fresh"))
        await writer.drain()
        await asyncio.sleep(0.02)
        writer.write(unasked)

    server = await serve(script)
    pool = OriginPool(server.url, [], limit=10)
    assert (await pool.post(b"{}")).body == b"fresh"
    await asyncio.sleep(0.05)
    assert (await pool.post(b"{}")).body == b"fresh"
    pool.close()
    assert server.connections == 2


async def test_a_connection_the_server_closed_while_idle_is_not_reused(serve) -> None:  # type: ignore[no-untyped-def]
    async def script(request: bytes, writer: asyncio.StreamWriter) -> None:
        await ok(request, writer)
        await writer.drain()
        writer.close()  # a keep-alive timeout on the server's side, right after the reply

    server = await serve(script)
    pool = OriginPool(server.url, [], limit=10)
    for _ in range(3):
        assert (await pool.post(b"{}")).status == 200
        await asyncio.sleep(0.05)  # the close arrives while the connection is idle
    pool.close()
    assert server.connections == 3


async def test_an_idle_connection_past_the_keepalive_is_not_reused(
    serve,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(http_origin, "KEEPALIVE_S", 0.0)
    server = await serve(ok)
    pool = OriginPool(server.url, [], limit=10)
    await pool.post(b"{}")
    await asyncio.sleep(0.01)
    await pool.post(b"{}")
    pool.close()
    assert server.connections == 2


@pytest.mark.parametrize(
    ("written", "message"),
    [
        (b"", "closed the connection before replying"),
        (b"HTTP/1.1 200 OK\r\ncontent-length: 50\r\n\r\ncut", "in the middle of its reply"),
        (b"SMTP ready\r\n\r\n", "not valid HTTP/1.1"),
        (reply(b"x", "content-encoding: zstd"), "unsupported content-encoding"),
        (reply(b"not gzip", "content-encoding: gzip"), "cannot decode"),
    ],
)
async def test_a_broken_reply_is_a_connection_error(serve, written: bytes, message: str) -> None:  # type: ignore[no-untyped-def]
    async def script(_: bytes, writer: asyncio.StreamWriter) -> None:
        writer.write(written)
        await writer.drain()
        writer.close()

    server = await serve(script)
    pool = OriginPool(server.url, [], limit=10)
    with pytest.raises(ConnectionError, match=message):
        await pool.post(b"{}")
    server.script = ok
    assert (await pool.post(b"{}")).status == 200  # a fresh connection, not the broken one
    pool.close()
    assert server.connections == 2


async def test_a_request_given_up_takes_its_connection_along(serve) -> None:  # type: ignore[no-untyped-def]
    """A timed-out request's connection is closed at once (the server may stop working on it)
    and its reply, were it to come, could not answer the next request."""
    closed_by_client: list[bool] = []

    async def slow_then_fast(request: bytes, writer: asyncio.StreamWriter) -> None:
        if b'"slow"' in request:
            at_eof = await asyncio.wait_for(server.readers[writer].read(1), 5)
            closed_by_client.append(at_eof == b"")
            writer.close()
        else:
            writer.write(reply(b"fresh"))

    server = await serve(slow_then_fast)
    pool = OriginPool(server.url, [], limit=10)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.1):
            await pool.post(b'"slow"')
    assert (await pool.post(b'"fast"')).body == b"fresh"
    pool.close()
    assert closed_by_client == [True]
    assert server.connections == 2


async def test_the_limit_bounds_open_connections(serve) -> None:  # type: ignore[no-untyped-def]
    async def slow(request: bytes, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(0.05)
        await ok(request, writer)

    server = await serve(slow)
    pool = OriginPool(server.url, [], limit=2)
    answers = await asyncio.gather(*(pool.post(b"{}") for _ in range(6)))
    pool.close()
    assert [a.status for a in answers] == [200] * 6
    assert server.connections == server.most_open == 2


async def test_closing_the_pool_fails_what_is_in_flight_and_what_waits(serve) -> None:  # type: ignore[no-untyped-def]
    async def never(_: bytes, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(10)

    server = await serve(never)
    pool = OriginPool(server.url, [], limit=1)
    in_flight = asyncio.ensure_future(pool.post(b"{}"))
    waiting = asyncio.ensure_future(pool.post(b"{}"))  # for the one connection slot
    while not server.requests:
        await asyncio.sleep(0.01)
    pool.close()
    for call in (in_flight, waiting):
        with pytest.raises(ConnectionError, match="pool (was|is) closed"):
            await asyncio.wait_for(call, 5)
    with pytest.raises(ConnectionError, match="pool is closed"):
        await pool.post(b"{}")
    assert server.connections == 1


async def test_a_connection_closed_at_once_is_a_connection_error() -> None:
    async def hang_up(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.transport.abort()

    listener = await asyncio.start_server(hang_up, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    pool = OriginPool(f"http://127.0.0.1:{port}/", [], limit=1)
    try:
        for _ in range(3):
            with pytest.raises(ConnectionError):
                await asyncio.wait_for(pool.post(b"{}"), 5)
    finally:
        pool.close()
        listener.close()
        await listener.wait_closed()


async def test_a_refused_connection() -> None:
    listener = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    listener.close()
    await listener.wait_closed()
    with pytest.raises(ConnectionRefusedError):
        await OriginPool(f"http://127.0.0.1:{port}/", [], limit=1).post(b"{}")


def test_supports_plain_http_only() -> None:
    assert supports("http://127.0.0.1:8000/v1/chat/completions")
    assert supports("http://[::1]:8000/v1/chat/completions")
    assert not supports("https://api.openai.com/v1/chat/completions")
    assert not supports("http://user:secret@gateway.internal/v1")
    assert not supports("http://gätewäy.internal/v1")
    with pytest.raises(ValueError, match="plain http"):
        OriginPool("https://api.openai.com/v1", [], limit=1)
