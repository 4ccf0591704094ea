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

# Set by the transport for each request, or owned by aiohttp's own content negotiation.
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
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._template: httpx2.Request | None = None
        self._url = ""
        self._proxy: str | None = None
        self._headers: dict[str, str] = {}
        self._session: aiohttp.ClientSession | None = None
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
        self._template = request
        return request

    def _session_here(self) -> aiohttp.ClientSession:
        """The session of the running loop (an aiohttp session is bound to the loop it was made
        on; a client reused from another loop gets a new one)."""
        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop:
            self._loop = loop
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
        session = self._session_here()
        data = json.dumps(body, ensure_ascii=False).encode()
        try:
            async with session.post(self._url, data=data, proxy=self._proxy) as response:
                content = await response.read()
                status, raw_headers = response.status, response.raw_headers
        except TimeoutError:
            raise  # recorded as a timeout by the caller, as the SDK's own timeouts are
        except aiohttp.ClientError as exc:
            raise openai.APIConnectionError(
                message=f"Connection error: {exc}", request=template
            ) from exc
        if 200 <= status < 300:
            return content
        failed = httpx2.Response(
            status, headers=list(raw_headers), content=content, request=template
        )
        raise self._sdk._make_status_error_from_response(failed)

    async def aclose(self) -> None:
        if self._session is not None and self._loop is asyncio.get_running_loop():
            await self._session.close()
        self._session = None


def _env_proxy(url: str) -> str | None:
    """The proxy HTTP(S)_PROXY / ALL_PROXY / NO_PROXY give for `url`, as httpx reads them for the
    SDK. Resolved once: aiohttp's `trust_env` looks them up again in a thread on every request."""
    parts = urlsplit(url)
    if urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    proxies = urllib.request.getproxies()
    return proxies.get(parts.scheme) or proxies.get("all")
