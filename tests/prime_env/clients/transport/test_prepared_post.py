"""PreparedPost sends what the openai SDK would send, raises what it would raise, and captures once."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import openai
import pytest
from aiohttp import web

from prime_env.clients.openai_client import OpenAIClient
from prime_env.clients.retry import AdaptiveLimiter, RetryPolicy
from prime_env.clients.transport import prepared_post
from prime_env.clients.transport.prepared_post import PreparedPost
from tests.support import free_port

COMPLETION = {
    "id": "c1",
    "object": "chat.completion",
    "created": 0,
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}
# Set per request by the HTTP library, not by the SDK.
TRANSPORT = {"host", "content-length", "connection", "accept-encoding"}


@dataclass
class Recorder:
    url: str = ""
    seen: list[tuple[str, dict[str, str], bytes]] = field(default_factory=list)
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


@pytest.fixture
async def server() -> AsyncIterator[Recorder]:
    rec = Recorder()

    async def handle(request: web.Request) -> web.Response:
        rec.seen.append((str(request.rel_url), dict(request.headers), await request.read()))
        body = COMPLETION if rec.status == 200 else {"error": {"message": "slow down"}}
        return web.json_response(body, status=rec.status, headers=rec.headers)

    app = web.Application()
    app.router.add_post("/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    rec.url = f"http://127.0.0.1:{port}/v1"
    yield rec
    await runner.cleanup()


async def test_sends_the_url_and_headers_the_sdk_sends(server: Recorder) -> None:
    extra = {"HTTP-Referer": "https://example.org/app", "X-Title": "prime"}
    sdk = openai.AsyncOpenAI(
        base_url=server.url,
        api_key="sk-test-123",
        default_headers=extra,
        timeout=RetryPolicy().timeout_s,  # the SDK reports it in x-stainless-read-timeout
    )
    await sdk.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    await sdk.close()
    ours = OpenAIClient(
        "m", base_url=server.url, api_key="sk-test-123", default_headers=extra,
        limiter=AdaptiveLimiter(),
    )  # fmt: skip
    response = await ours.chat([{"role": "user", "content": "x"}])
    await ours.aclose()

    assert response.message["content"] == "hi"
    (sdk_path, sdk_headers, _), (our_path, our_headers, our_body) = server.seen
    assert our_path == sdk_path == "/v1/chat/completions"

    def comparable(headers: dict[str, str]) -> dict[str, str]:
        return {k.lower(): v for k, v in headers.items() if k.lower() not in TRANSPORT}

    ours_sent = comparable(our_headers)
    assert ours_sent == comparable(sdk_headers)
    assert ours_sent["authorization"] == "Bearer sk-test-123"
    assert ours_sent["http-referer"] == "https://example.org/app"
    assert json.loads(our_body)["messages"] == [{"role": "user", "content": "x"}]


async def test_concurrent_first_calls_capture_the_request_once(
    server: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    captures = 0
    original = PreparedPost._capture

    async def counting(self: PreparedPost) -> object:
        nonlocal captures
        captures += 1
        return await original(self)

    monkeypatch.setattr(PreparedPost, "_capture", counting)
    sdk = openai.AsyncOpenAI(base_url=server.url, api_key="k")
    post = PreparedPost(sdk, "/chat/completions", 10.0)
    bodies = await asyncio.gather(*(post({"n": i}) for i in range(40)))
    await post.aclose()
    await sdk.close()
    assert captures == 1
    assert len(server.seen) == 40  # the capture itself never reaches the server
    assert all(json.loads(body)["id"] == "c1" for body in bodies)


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (429, openai.RateLimitError),
        (503, openai.InternalServerError),
        (401, openai.AuthenticationError),
        (400, openai.BadRequestError),
    ],
)
async def test_error_statuses_raise_the_sdks_exceptions(
    server: Recorder, status: int, error: type[openai.APIStatusError]
) -> None:
    server.status, server.headers = status, {"retry-after": "7"}
    sdk = openai.AsyncOpenAI(base_url=server.url, api_key="k")
    post = PreparedPost(sdk, "/chat/completions", 10.0)
    with pytest.raises(error) as info:
        await post({})
    await post.aclose()
    await sdk.close()
    assert info.value.status_code == status
    assert info.value.message == f"Error code: {status} - slow down"
    assert info.value.response.headers["retry-after"] == "7"


async def test_refused_connection_is_the_sdks_connection_error() -> None:
    sdk = openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{free_port()}/v1", api_key="k")
    post = PreparedPost(sdk, "/chat/completions", 10.0)
    with pytest.raises(openai.APIConnectionError):
        await post({})
    await post.aclose()
    await sdk.close()


async def test_one_client_across_event_loops(server: Recorder) -> None:
    """An aiohttp session belongs to its loop: a client reused from a new loop opens a new one."""
    sdk = openai.AsyncOpenAI(base_url=server.url, api_key="k")
    post = PreparedPost(sdk, "/chat/completions", 10.0)

    async def call(close: bool) -> bytes:
        body = await post({})
        if close:
            await post.aclose()
        return body

    # Each on a fresh loop in a thread, while this loop serves the requests; the first loop
    # ends with its session still open, as a notebook cell's loop would.
    first = await asyncio.to_thread(asyncio.run, call(close=False))
    second = await asyncio.to_thread(asyncio.run, call(close=True))
    await sdk.close()
    assert json.loads(first) == json.loads(second) == COMPLETION
    assert len(server.seen) == 2


def test_proxy_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    monkeypatch.setenv("NO_PROXY", "internal.example")
    assert prepared_post._env_proxy("https://api.openai.com/v1/x") == "http://proxy.invalid:3128"
    assert prepared_post._env_proxy("https://internal.example/v1/x") is None
    assert prepared_post._env_proxy("http://api.openai.com/v1/x") is None  # no HTTP_PROXY set


async def test_plain_http_uses_its_own_connections_and_a_proxy_uses_aiohttp(
    server: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both transports send the same request; with HTTP_PROXY set, the POST goes to the proxy
    (here the recorder itself, which answers the absolute-form request as the target would)."""
    for name in ("HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    direct_sdk = openai.AsyncOpenAI(base_url=server.url, api_key="k")
    direct = PreparedPost(direct_sdk, "/chat/completions", 10.0)
    assert json.loads(await direct({"via": "direct"})) == COMPLETION
    await direct.aclose()
    await direct_sdk.close()

    monkeypatch.setenv("HTTP_PROXY", server.url.removesuffix("/v1"))
    proxied_sdk = openai.AsyncOpenAI(base_url="http://api.invalid/v1", api_key="k")
    proxied = PreparedPost(proxied_sdk, "/chat/completions", 10.0)
    assert json.loads(await proxied({"via": "proxy"})) == COMPLETION
    await proxied.aclose()
    await proxied_sdk.close()

    assert (direct._plain, proxied._plain) == (True, False)
    (direct_path, direct_headers, direct_body), (proxy_path, proxy_headers, proxy_body) = (
        server.seen
    )
    assert direct_path == proxy_path == "/v1/chat/completions"
    assert proxy_headers["Host"] == "api.invalid"
    assert json.loads(direct_body) == {"via": "direct"}
    assert json.loads(proxy_body) == {"via": "proxy"}
    assert direct_headers["Authorization"] == proxy_headers["Authorization"] == "Bearer k"


@pytest.mark.parametrize("http", ["h11", "httptools"])
async def test_keep_alive_against_uvicorn(http: str) -> None:
    """vLLM's OpenAI server runs on uvicorn: one connection serves a run's calls."""
    import uvicorn

    clients: list[tuple[str, int]] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        clients.append(scope["client"])
        more_body = True
        while more_body:  # read the request to its end before answering
            more_body = (await receive()).get("more_body", False)
        body = json.dumps(COMPLETION).encode()
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, http=http, log_level="warning")
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    ours = OpenAIClient("m", base_url=f"http://127.0.0.1:{port}/v1", api_key="k")
    try:
        for _ in range(5):
            response = await ours.chat([{"role": "user", "content": "x"}])
            assert response.message["content"] == "hi"
    finally:
        await ours.aclose()
        server.should_exit = True
        await serving
    assert len(clients) == 5
    assert len(set(clients)) == 1  # the same client address and port: one connection
