"""A twine upload is refused the same way whether its body is small (declared within
`max_anonymous_body_bytes`: the route authenticates it after reading the body) or large (the
request-limits middleware authenticates it before a byte is read), and a refusal writes nothing:
no file row, no metadata row, no blob, no scratch file.

In-process (`create_app` behind a TestClient: real multipart bodies with their real
Content-Length), as the other route-logic tests of the upload do."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session, select

from hub_server.registry.models import DistFile, FileMetadata
from tests.hub_server.hardening_hub import HardenedHub
from tests.hub_server.index.test_upload_safety import multipart
from tests.hub_server.wheels import twine_upload_form, wheel_bytes

# Enough padding (in a form field twine sends too) to take a body past the anonymous limit.
_LARGE_PAD = 80 * 1024


def _body(name: str, size: str) -> tuple[bytes, str]:
    """A twine upload of `name` 1.0.0: ("small" or "large", see the module doc)."""
    fields, files = twine_upload_form(name, "1.0.0", wheel_bytes(name, "1.0.0"))
    if size == "large":
        fields["description"] = "x" * _LARGE_PAD
    filename, data, _ = files["content"]
    return multipart(fields, filename, data)


def _post(hub: HardenedHub, path: str, token: str | None, name: str, size: str) -> int:
    body, content_type = _body(name, size)
    small = len(body) <= hub.settings.max_anonymous_body_bytes
    assert small == (size == "small"), len(body)
    with hub.client() as client:
        response = client.post(
            path,
            content=body,
            headers={"Content-Type": content_type},
            auth=("__token__", token) if token is not None else None,
        )
    return response.status_code


def _written(hub: HardenedHub) -> tuple[int, int, list[str]]:
    """(file rows, metadata rows, every file under the blob store but the live locks)."""
    with Session(hub.engine) as session:
        files = len(session.exec(select(DistFile)).all())
        metadata = len(session.exec(select(FileMetadata)).all())
    root = Path(hub.settings.resolved_storage_url)
    blobs = sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and not p.name.startswith(".live-")
    )
    return files, metadata, blobs


@pytest.fixture
def hub(tmp_path: Path) -> HardenedHub:
    return HardenedHub(tmp_path / "hub")


@pytest.mark.parametrize("size", ["small", "large"])
def test_every_refusal_is_the_same_for_a_small_and_a_large_upload(
    hub: HardenedHub, size: str
) -> None:
    read_only = hub.token("alice", ["read"])
    wordle_only = hub.token("alice", ["upload:alice/wordle"])
    other_project = hub.token("alice", ["upload:acme/elsewhere"])
    cases = [
        ("wrong token", "/alice/legacy/", "phub_wrong", "fresh-env", 401),
        ("no token", "/alice/legacy/", None, "fresh-env", 401),
        ("read-only token", "/alice/legacy/", read_only, "fresh-env", 403),
        ("another user's namespace", "/alice/legacy/", hub.tokens["bob"], "fresh-env", 403),
        ("another user's project", "/alice/legacy/", hub.tokens["bob"], "wordle", 403),
        ("an org the user is not in", "/acme/legacy/", hub.tokens["carol"], "secret", 403),
        ("no such owner", "/nobody/legacy/", hub.tokens["bob"], "fresh-env", 404),
        ("a project the token does not name", "/alice/legacy/", wordle_only, "other", 403),
        # A name the token could not read is answered like a missing one (no probing by upload).
        ("a new project the token does not name", "/alice/legacy/", wordle_only, "new", 404),
        ("a private project the token does not name", "/acme/legacy/", other_project, "secret", 404),
    ]  # fmt: skip
    before = _written(hub)
    answers = {what: _post(hub, path, token, name, size) for what, path, token, name, _ in cases}
    assert answers == {what: status for what, _, _, _, status in cases}
    assert _written(hub) == before
    # The same caller with the right token is let in, on either path.
    assert _post(hub, "/alice/legacy/", hub.tokens["alice"], "fresh-env", size) == 200
    files, metadata, _ = _written(hub)
    assert (files, metadata) == (1, 1)


def test_a_private_project_is_not_revealed_to_an_outsider_either_way(tmp_path: Path) -> None:
    """bob (no member of acme) gets the same answer for acme's private project as for a name
    that does not exist, small or large."""
    hub = HardenedHub(tmp_path / "hub")
    statuses = {
        (size, name): _post(hub, "/acme/legacy/", hub.tokens["bob"], name, size)
        for size in ("small", "large")
        for name in ("secret", "no-such-env")
    }
    assert len(set(statuses.values())) == 1, statuses
    assert _written(hub)[:2] == (0, 0)


@pytest.mark.parametrize("size", ["small", "large"])
def test_the_upload_rate_holds_on_both_paths(tmp_path: Path, size: str) -> None:
    hub = HardenedHub(tmp_path / "hub", uploads_per_minute=2)
    token = hub.tokens["alice"]
    codes = [_post(hub, "/alice/legacy/", token, f"rate-{n}", size) for n in range(3)]
    assert codes == [200, 200, 429]
    assert _written(hub)[:2] == (2, 2)


@pytest.mark.parametrize("size", ["small", "large"])
def test_failed_tokens_lock_the_ip_out_on_both_paths(tmp_path: Path, size: str) -> None:
    """Guessing tokens through small uploads counts against the IP like any other failed
    token, and once locked out even a right token waits (429) and stores nothing."""
    hub = HardenedHub(tmp_path / "hub", failed_logins_per_minute=3)
    codes = [_post(hub, "/alice/legacy/", f"phub_guess{n}", "guess", size) for n in range(3)]
    codes.append(_post(hub, "/alice/legacy/", hub.tokens["alice"], "guess", size))
    assert codes == [401, 401, 401, 429]
    assert _written(hub)[:2] == (0, 0)


def test_a_chunked_upload_with_a_wrong_token_is_refused_before_reading(hub: HardenedHub) -> None:
    """No Content-Length: not a small upload, so the middleware refuses it unread."""
    status, pulled = asyncio.run(
        hub.raw(
            "POST", "/alice/legacy/", token="phub_wrong", basic=True, body_size=1024,
            declare_length=False, content_type="multipart/form-data; boundary=x",
        )
    )  # fmt: skip
    assert (status, pulled) == (401, 0)


def test_a_small_declared_upload_is_cut_at_the_anonymous_limit(hub: HardenedHub) -> None:
    """A body that declares a small length and also streams chunked (or sends more) is
    counted against the anonymous limit, since nobody authenticated it yet: a valid token does
    not raise that limit."""
    body, content_type = _body("cut-env", "large")
    assert len(body) > hub.settings.max_anonymous_body_bytes
    framing = [(b"content-length", b"1024")]
    status, _ = asyncio.run(_raw(hub, body, content_type, hub.tokens["alice"], framing))
    assert status == 413
    assert _written(hub)[:2] == (0, 0)


@pytest.mark.parametrize("token", ["phub_wrong", None])
def test_an_unframed_body_is_refused_before_it_is_read(hub: HardenedHub, token: str | None) -> None:
    """A body with neither Content-Length nor Transfer-Encoding (an HTTP/2 server may deliver
    one so) has a size the middleware cannot bound or see coming: the route authenticates it
    before reading a byte, as it did before small uploads were authenticated after reading."""
    body = b"x" * (8 * 1024 * 1024)
    status, pulled = asyncio.run(_raw(hub, body, "multipart/form-data; boundary=x", token, []))
    assert (status, pulled) == (401, 0)


def test_an_unframed_upload_with_a_good_token_is_stored(hub: HardenedHub) -> None:
    body, content_type = _body("unframed-env", "small")
    status, _ = asyncio.run(_raw(hub, body, content_type, hub.tokens["alice"], []))
    assert status == 200
    assert _written(hub)[:2] == (1, 1)


async def _raw(
    hub: HardenedHub,
    body: bytes,
    content_type: str,
    token: str | None,
    framing: list[tuple[bytes, bytes]],
) -> tuple[int, int]:
    """POST `body` to /alice/legacy/ in 16 KiB messages with exactly the `framing` headers
    given (a Content-Length that may lie, or none); (status, body bytes the app pulled)."""
    headers = [(b"content-type", content_type.encode()), *framing]
    if token is not None:
        credentials = base64.b64encode(f"__token__:{token}".encode())
        headers.append((b"authorization", b"Basic " + credentials))
    chunks = [body[i : i + 16 * 1024] for i in range(0, len(body), 16 * 1024)]
    pulled = 0

    async def receive() -> dict[str, Any]:
        nonlocal pulled
        if not chunks:
            return {"type": "http.disconnect"}
        chunk = chunks.pop(0)
        pulled += len(chunk)
        return {"type": "http.request", "body": chunk, "more_body": bool(chunks)}

    status = await hub.send_raw("POST", "/alice/legacy/", headers, receive, http_version="2")
    return status, pulled
