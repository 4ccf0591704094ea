"""The hub client: errors (a hub in-process; an unreachable or foreign server on loopback),
transfers and token handling."""

from __future__ import annotations

import hashlib
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from hub_client.client import HubClient, HubError, HubRetryPolicy, NotFound
from tests.hub_server.inproc import InProcessHub
from tests.support import free_port


def test_unreachable_hub_says_how_to_fix() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    once = HubRetryPolicy(max_attempts=1)
    with HubClient(url, timeout=5, retry=once) as client, pytest.raises(HubError) as caught:
        client.list_environments()
    message = str(caught.value)
    assert message.startswith(f"cannot reach the hub at {url}")
    assert "PRIME_HUB_URL" in message and "prime login" in message


def test_bad_token_is_401_with_a_fix(inproc_hub: InProcessHub) -> None:
    with (
        HubClient(inproc_hub.url, "phub_" + "z" * 43, transport=inproc_hub.transport) as client,
        pytest.raises(HubError) as caught,
    ):
        client.whoami()
    assert caught.value.status == 401
    assert "not authenticated" in str(caught.value) and "prime login" in str(caught.value)
    with (
        HubClient(inproc_hub.url, transport=inproc_hub.transport) as anonymous,
        pytest.raises(HubError, match="PRIME_API_KEY"),
    ):
        anonymous.whoami()


def test_missing_environment_is_not_found(inproc_hub: InProcessHub) -> None:
    with (
        HubClient(inproc_hub.url, inproc_hub.admin_token, transport=inproc_hub.transport) as client,
        pytest.raises(NotFound) as caught,
    ):
        client.environment("admin", "nothing-here")
    assert caught.value.status == 404 and "nothing-here" in str(caught.value)


def test_whoami_with_a_good_token(inproc_hub: InProcessHub) -> None:
    with HubClient(
        inproc_hub.url, inproc_hub.admin_token, transport=inproc_hub.transport
    ) as client:
        who = client.whoami()
    assert who.username == "admin" and who.is_admin


class _Recorder(http.server.BaseHTTPRequestHandler):
    """A plain file server that records the Authorization header it receives."""

    seen: ClassVar[list[str | None]] = []
    body: ClassVar[bytes] = b"payload bytes"

    def do_GET(self) -> None:
        type(self).seen.append(self.headers.get("Authorization"))
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        """No access log on stderr: the test reads only its assertions."""


@pytest.fixture
def other_origin() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Recorder.seen = []
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def test_download_checks_sha256_and_never_leaks_the_token(
    tmp_path: Path, other_origin: str
) -> None:
    hub_url = f"http://127.0.0.1:{free_port()}"  # the token belongs to this (other) origin
    good = hashlib.sha256(_Recorder.body).hexdigest()
    with HubClient(hub_url, "phub_secret") as client:
        dest = client.download(f"{other_origin}/file.bin", tmp_path / "file.bin", sha256=good)
        assert dest.read_bytes() == _Recorder.body
        with pytest.raises(HubError, match="sha256 mismatch"):
            client.download(f"{other_origin}/file.bin", tmp_path / "bad.bin", sha256="0" * 64)
    assert _Recorder.seen == [None, None]  # no Authorization sent to a foreign origin
    assert not list(tmp_path.glob("*.bin.part")) and not (tmp_path / "bad.bin").exists()


class _Halves(http.server.BaseHTTPRequestHandler):
    """Sends half the body, waits until a second download is halfway too, then the rest.

    Half is more than loopback's socket buffers hold, so a download is halfway only once its
    client is writing the file."""

    body: ClassVar[bytes] = bytes(range(256)) * (96 * 1024)  # 24 MiB
    halfway: ClassVar[threading.Barrier] = threading.Barrier(2, timeout=30)

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        middle = len(self.body) // 2
        self.wfile.write(self.body[:middle])
        self.wfile.flush()
        self.halfway.wait()
        self.wfile.write(self.body[middle:])

    def log_message(self, *args: object) -> None:
        """No access log on stderr: the test reads only its assertions."""


def test_two_downloads_of_one_file_at_once_both_get_it(tmp_path: Path) -> None:
    """Two processes installing the same wheel share the cache's file name (by sha256): each
    writes its own partial file and renames it into place, neither loses the other's."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Halves)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/env.whl"
    dest = tmp_path / "cache" / "env.whl"
    sha256 = hashlib.sha256(_Halves.body).hexdigest()
    errors: list[BaseException] = []

    def fetch() -> None:
        try:
            with HubClient(url) as client:
                client.download(url, dest, sha256=sha256)
        except (HubError, OSError) as exc:  # reported below, from the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=fetch) for _ in range(2)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        server.shutdown()
    assert errors == []
    assert dest.read_bytes() == _Halves.body
    assert list(dest.parent.iterdir()) == [dest]  # no partial file left


class _Flood(http.server.BaseHTTPRequestHandler):
    """Serves 1 MiB, announced (`/announced`) or not (`/unannounced`: no Content-Length)."""

    def do_GET(self) -> None:
        self.send_response(200)
        if self.path == "/announced":
            self.send_header("Content-Length", str(1024 * 1024))
        self.end_headers()
        for _ in range(64):
            self.wfile.write(b"x" * 16384)

    def log_message(self, *args: object) -> None:
        """No access log on stderr: the test reads only its assertions."""


@pytest.mark.parametrize("path", ["/announced", "/unannounced"])
def test_download_stops_at_the_size_limit_and_keeps_nothing(tmp_path: Path, path: str) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Flood)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        with HubClient(url) as client, pytest.raises(HubError) as caught:
            client.download(f"{url}{path}", tmp_path / "dl" / "big.whl", max_bytes=64 * 1024)
    finally:
        server.shutdown()
    assert "the hub sent more than" in str(caught.value) and "nothing was kept" in str(caught.value)
    assert list((tmp_path / "dl").iterdir()) == []


def test_non_hub_server_is_a_clear_error(other_origin: str) -> None:
    with (
        HubClient(other_origin) as client,
        pytest.raises(HubError, match="did not answer with JSON"),
    ):
        client.list_environments()
