"""The rollouts' event loop sends an aiohttp request body within the call that sends it (as
aiohttp does on Python 3.12+), and a body that has to wait for the socket still arrives whole,
or is cancelled cleanly by a timeout."""

from __future__ import annotations

import asyncio
import hashlib
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import aiohttp
import pytest

from prime_env.process import event_loop

pytestmark = pytest.mark.timeout(60)


class _Recorder(BaseHTTPRequestHandler):
    """Answers every POST with `{}` on a kept-alive connection; records when each body was in
    and its sha256."""

    protocol_version = "HTTP/1.1"
    arrivals: ClassVar[list[tuple[float, int, str]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        self.arrivals.append((time.monotonic(), len(body), hashlib.sha256(body).hexdigest()))
        self.send_response(200)
        self.send_header("content-length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *_: object) -> None:
        """Silent: the test reads `arrivals`, not the access log."""


@pytest.fixture
def server() -> Iterator[str]:
    _Recorder.arrivals = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_a_body_leaves_within_the_call_not_on_a_later_pass_of_the_loop(server: str) -> None:
    """The post runs until it waits for the answer; the loop is then blocked for a second. A
    body written by a task of its own (aiohttp on Python 3.11 without this loop) can only leave
    once the block ends, so the server cannot have it before."""

    async def main() -> tuple[float, float]:
        async with aiohttp.ClientSession() as session:
            await _post(session, server, b"warm-up")  # the connection is now in the pool
            posting = asyncio.create_task(_post(session, server, b'{"hello": 1}'))
            await asyncio.sleep(0)  # the post's first step: it sends, then waits
            blocked_at = time.monotonic()
            time.sleep(1.0)  # noqa: ASYNC251 - the loop blocked: no task or callback runs
            unblocked_at = time.monotonic()
            await posting
            return blocked_at, unblocked_at

    blocked_at, unblocked_at = event_loop.run(main())
    arrived = _Recorder.arrivals[1][0]
    assert blocked_at <= arrived < unblocked_at, (arrived - blocked_at, "s into the block")


def test_a_body_that_waits_for_the_socket_arrives_whole(server: str) -> None:
    body = bytes(range(256)) * (32 * 1024)  # 8 MiB: far over the transport's buffer

    async def main() -> bytes:
        async with aiohttp.ClientSession() as session:
            return await _post(session, server, body)

    assert event_loop.run(main()) == b"{}"
    assert _Recorder.arrivals[-1][1:] == (len(body), hashlib.sha256(body).hexdigest())


def test_a_timeout_cancels_a_waiting_body_and_leaves_no_task_behind() -> None:
    """A server that accepts and never reads: the body's writer waits on the full socket until
    the request's timeout cancels it."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    body = b"x" * (64 * 1024 * 1024)

    async def main() -> set[asyncio.Task[object]]:
        timeout = aiohttp.ClientTimeout(total=0.5)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            with pytest.raises(TimeoutError):
                await _post(session, f"http://127.0.0.1:{port}/", body)
        await asyncio.sleep(0.1)
        return asyncio.all_tasks() - {asyncio.current_task()}  # type: ignore[operator]

    try:
        assert event_loop.run(main()) == set()
    finally:
        listener.close()


def test_other_tasks_are_made_as_before() -> None:
    async def child() -> str:
        return "ok"

    async def main() -> tuple[bool, str]:
        task = asyncio.create_task(child(), name="child")
        return isinstance(task, asyncio.Task) and task.get_name() == "child", await task

    assert event_loop.run(main()) == (True, "ok")


async def _post(session: aiohttp.ClientSession, url: str, body: bytes) -> bytes:
    async with session.post(url, data=body) as response:
        return await response.read()
