"""Non-streaming JSON POSTs: the request the `openai` SDK builds, sent over one aiohttp session.

Why: at a hundred-plus requests in flight one event loop is CPU-bound, and the SDK's per-call
work (request options model, URL parsing, header merging, httpx request and response objects
around its aiohttp transport) costs several times the CPU of the same POST on aiohttp alone;
at fixed-latency replies that CPU decides how close `-c 128` comes to the ideal rate (measured
by `scripts/bench_eval.py`; the figures are in docs/benchmarks.md, "Model client request path").

The SDK still decides everything about the request: its URL (base URL, default query) and every
header (auth, organisation, project, user agent, platform headers, the caller's default
headers) are captured once from a request the SDK itself builds, through its public
`with_options(http_client=...)` hook; and a non-2xx answer raises the exception the SDK raises
for it (`RateLimitError`, `InternalServerError`, ...), built by the SDK from the response.
Only the per-call rebuilding of that same request is skipped. Streaming stays on the SDK.

The POST itself goes over `http_origin`'s keep-alive connections for a plain-HTTP endpoint
(where request rates are highest: local and cluster inference servers) and over aiohttp for
TLS and proxies.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import httpx2
import openai

from prime_env.clients.transport import http_origin

# Set per request by the transport (aiohttp or http_origin), content negotiation included.
_PER_REQUEST = {"host", "content-length", "transfer-encoding", "connection", "accept-encoding"}
_MAX_CONNECTIONS = 1000  # the SDK's own default connection limit (aiohttp's is 100)


class _Capture(openai.DefaultAsyncHttpxClient):
    """An HTTP client for the SDK that keeps the request it is asked to send and answers `{}`."""

    captured: httpx2.Request | None = None

    async def send(self, request: httpx2.Request, **_: Any) -> httpx2.Response:  # type: ignore[override]
        self.captured = request
        return httpx2.Response(200, json={}, request=request)


class PreparedPost:
    """POST a JSON body to one API path of an SDK client; returns the raw 2xx body."""

    def __init__(self, sdk: openai.AsyncOpenAI, path: str, timeout_s: float | None) -> None:
        """`timeout_s` bounds each POST; None when the caller bounds each call itself (as
        `call_with_retries` does), which spares aiohttp a timer per request."""
        self._sdk = sdk
        self._path = path
        self._timeout_s = timeout_s
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._template: httpx2.Request | None = None
        self._url = ""
        self._proxy: str | None = None
        self._headers: dict[str, str] = {}
        self._raw_headers: http_origin.Headers = []
        self._plain = False  # plain HTTP, no proxy: http_origin instead of aiohttp
        self._session: aiohttp.ClientSession | None = None
        self._pool: http_origin.OriginPool | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._preparing: asyncio.Lock | None = None

    async def _prepare(self) -> httpx2.Request:
        # The first calls arrive together (a hundred rollouts start at once): capture once.
        self._preparing = self._preparing or asyncio.Lock()
        async with self._preparing:
            return self._template or await self._capture()

    async def _capture(self) -> httpx2.Request:
        capture = _Capture(verify=False)  # it never connects: skip loading the CA bundle
        async with self._sdk.with_options(http_client=capture) as probe:
            await probe.post(self._path, body={}, cast_to=bytes)
        request = capture.captured
        if request is None:  # pragma: no cover - the SDK always sends through its http client
            raise RuntimeError("the openai SDK built no request to capture")
        self._url = str(request.url)
        self._proxy = _env_proxy(self._url)
        self._headers = {k: v for k, v in request.headers.items() if k not in _PER_REQUEST}
        self._raw_headers = [
            (name, value)
            for name, value in request.headers.raw
            if name.decode("latin-1").lower() not in _PER_REQUEST
        ]
        self._plain = self._proxy is None and http_origin.supports(self._url)
        self._template = request
        return request

    def _on_this_loop(self) -> None:
        """Connections belong to the loop they were made on: a client reused from another loop
        (a notebook cell's, a worker process's) starts new ones and leaves the old ones be."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._loop = loop
            self._session = self._pool = None

    def _pool_here(self) -> http_origin.OriginPool:
        self._on_this_loop()
        if self._pool is None:
            self._pool = http_origin.OriginPool(self._url, self._raw_headers, _MAX_CONNECTIONS)
        return self._pool

    def _session_here(self) -> aiohttp.ClientSession:
        self._on_this_loop()
        if self._session is None:
            # The captured headers are the session's defaults: aiohttp copies them per request
            # in C, where per-request headers are merged key by key in Python.
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=_MAX_CONNECTIONS),
                timeout=self._timeout,
                headers=self._headers,
            )
        return self._session

    async def __call__(self, body: dict[str, Any]) -> bytes:
        template = self._template or await self._prepare()
        data = json.dumps(body, ensure_ascii=False).encode()
        try:
            if self._plain:
                status, raw_headers, content = await self._post_plain(data)
            else:
                status, raw_headers, content = await self._post_aiohttp(data)
        except TimeoutError:
            raise  # recorded as a timeout by the caller, as the SDK's own timeouts are
        except (aiohttp.ClientError, OSError) as exc:
            raise openai.APIConnectionError(
                message=f"Connection error: {exc}", request=template
            ) from exc
        if 200 <= status < 300:
            return content
        failed = httpx2.Response(
            status, headers=list(raw_headers), content=content, request=template
        )
        raise self._sdk._make_status_error_from_response(failed)

    async def _post_plain(self, data: bytes) -> tuple[int, Any, bytes]:
        pool = self._pool_here()
        if self._timeout_s is None:
            reply = await pool.post(data)
        else:
            async with asyncio.timeout(self._timeout_s):
                reply = await pool.post(data)
        return reply.status, reply.headers, reply.body

    async def _post_aiohttp(self, data: bytes) -> tuple[int, Any, bytes]:
        session = self._session_here()
        async with session.post(self._url, data=data, proxy=self._proxy) as response:
            return response.status, response.raw_headers, await response.read()

    async def aclose(self) -> None:
        if self._loop is asyncio.get_running_loop():
            if self._session is not None:
                await self._session.close()
            if self._pool is not None:
                self._pool.close()
        self._session = self._pool = None


def _env_proxy(url: str) -> str | None:
    """The proxy HTTP(S)_PROXY / ALL_PROXY / NO_PROXY give for `url`, as httpx reads them for the
    SDK. Resolved once: aiohttp's `trust_env` looks them up again in a thread on every request."""
    parts = urlsplit(url)
    if urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    proxies = urllib.request.getproxies()
    return proxies.get(parts.scheme) or proxies.get("all")
