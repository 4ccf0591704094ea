"""The hub client's retry and redirect rules, against small real HTTP servers on loopback."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import pytest

from hub_client.client import HubClient, HubError, HubRetryPolicy
from hub_client.feedback import Feedback
from prime_env.clients.retry import retry_after_seconds
from registry_index.schemas.evals import CreateEvaluation, EnvironmentRef
from tests.hub_client import wire_examples as wire
from tests.support import free_port

FAST = HubRetryPolicy(max_attempts=4, base_delay_s=0.01, max_delay_s=0.05)
Handler = Callable[[http.server.BaseHTTPRequestHandler, int], tuple[int, dict[str, str], bytes]]


class _Server:
    """Answers each request with `handler(request, n)` (n counts from 1); records requests."""

    def __init__(self, handler: Handler) -> None:
        self.seen: list[tuple[str, str, str | None]] = []
        outer = self

        class Request(http.server.BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                outer.seen.append((self.command, self.path, self.headers.get("Authorization")))
                status, headers, body = handler(self, len(outer.seen))
                self.send_response(status)
                for key, value in {"Content-Length": str(len(body)), **headers}.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = _answer

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Request)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()


@pytest.fixture
def serve() -> Iterator[Callable[[Handler], _Server]]:
    servers: list[_Server] = []

    def start(handler: Handler) -> _Server:
        servers.append(_Server(handler))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


JSON = {"Content-Type": "application/json"}
CREATE = CreateEvaluation(
    name="x", model_name="m", environments=[EnvironmentRef(slug="alice/wordle")]
)


def test_retry_after_both_forms() -> None:
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert retry_after_seconds("7") == 7.0
    assert (
        retry_after_seconds(format_datetime(now + timedelta(seconds=30), usegmt=True), now=now)
        == 30.0
    )
    assert retry_after_seconds("Wed, 01 Jan 2025 00:00:00 GMT", now=now) == 0.0  # past
    assert retry_after_seconds("soon") is None and retry_after_seconds(None) is None


def test_get_waits_out_a_503_with_an_http_date(serve: Callable[[Handler], _Server]) -> None:
    def handler(_req: object, n: int) -> tuple[int, dict[str, str], bytes]:
        if n == 1:
            when = datetime.now(UTC) + timedelta(seconds=2)
            return 503, {"Retry-After": format_datetime(when, usegmt=True)}, b"busy"
        return 200, JSON, wire.whoami("x")

    server = serve(handler)
    start = time.monotonic()
    with HubClient(server.url, retry=FAST) as client:
        assert client.whoami().username == "x"
    # the date has one-second resolution: at least ~1 s, never the 0.05 s backoff
    assert time.monotonic() - start >= 0.9
    assert len(server.seen) == 2


def test_post_is_not_repeated_after_a_502(serve: Callable[[Handler], _Server]) -> None:
    server = serve(lambda _req, _n: (502, {}, b"bad gateway"))
    with HubClient(server.url, retry=FAST) as client, pytest.raises(HubError, match="HTTP 502"):
        client.create_evaluation(CREATE)
    assert [m for m, _, _ in server.seen] == ["POST"]  # it may have been applied: once only


def test_post_is_repeated_after_a_503_and_get_after_a_502(
    serve: Callable[[Handler], _Server],
) -> None:
    server = serve(
        lambda req, n: (
            503 if n == 1 else 502 if n == 3 else 200,
            JSON,
            wire.created("e1") if req.command == "POST" else wire.evaluation_page("e1"),
        )
    )
    with HubClient(server.url, retry=FAST) as client:
        assert client.create_evaluation(CREATE).id == "e1"  # 503: refused, safe to repeat
        assert [run.id for run in client.list_evaluations().data] == ["e1"]  # 502 then 200
    assert [m for m, _, _ in server.seen] == ["POST", "POST", "GET", "GET"]


def test_gives_up_after_the_attempts(serve: Callable[[Handler], _Server]) -> None:
    server = serve(lambda _req, _n: (503, {}, b"down"))
    with HubClient(server.url, retry=FAST) as client, pytest.raises(HubError, match="HTTP 503"):
        client.list_evaluations()
    assert len(server.seen) == FAST.max_attempts  # a hub that answers (even 503) gets patience


def test_a_hub_never_reached_fails_fast() -> None:
    warned: list[str] = []
    url = f"http://127.0.0.1:{free_port()}"
    with (
        HubClient(url, retry=FAST, feedback=Feedback(warn=warned.append)) as client,
        pytest.raises(HubError, match="cannot reach the hub"),
    ):
        client.list_evaluations()
    assert sum("retrying" in line for line in warned) == FAST.first_contact_attempts - 1


def test_redirect_to_storage_never_carries_the_token(
    serve: Callable[[Handler], _Server], tmp_path: Path
) -> None:
    storage = serve(lambda _req, _n: (200, {}, b"wheel bytes"))
    hub = serve(
        lambda req, _n: (
            (307, {"Location": f"{storage.url}/bucket/file.whl?X-Amz-Signature=s"}, b"")
            if req.path.startswith("/files/")
            else (307, {"Location": "/files/file.whl"}, b"")
        )
    )
    with HubClient(hub.url, "phub_secret", retry=FAST) as client:
        client.download(f"{hub.url}/owner/file.whl", tmp_path / "file.whl")
    assert (tmp_path / "file.whl").read_bytes() == b"wheel bytes"
    # same-origin hops keep the token; the storage origin never sees it
    assert [auth for _, _, auth in hub.seen] == ["Bearer phub_secret", "Bearer phub_secret"]
    assert storage.seen == [("GET", "/bucket/file.whl?X-Amz-Signature=s", None)]


def test_posts_the_hub_deduplicates_are_retried(serve: Callable[[Handler], _Server]) -> None:
    server = serve(
        lambda req, n: (
            (502, {}, b"")
            if n % 2
            else (
                200,
                JSON,
                wire.created("e1") if req.path.endswith("/evaluations/") else wire.batch(),
            )
        )
    )
    with HubClient(server.url, retry=FAST) as client:
        body = CREATE.model_copy(update={"client_run_id": "run-0"})
        assert client.create_evaluation(body).id == "e1"
        assert client.push_samples("e1", [{"a": 1}]).accepted == 1
    assert [m for m, _, _ in server.seen] == ["POST"] * 4  # each once more after its 502
