"""Hostile uploads, concurrent uploads and crashes: refused cleanly, stored once, never partial.

Refusals and the upload race are route logic, tested on the hub in-process; the reason phrase
twine prints (the server's HTTP protocol) and a SIGKILL mid-upload need a real server."""

from __future__ import annotations

import hashlib
import os
import socket
import sqlite3
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.hub_server.hubproc import HubAccounts, HubProcess
from tests.hub_server.inproc import InProcessHub, start_inproc_hub
from tests.hub_server.wheels import wheel_bytes

LIMIT = 2 * 1024 * 1024


@pytest.fixture(scope="module")
def small_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessHub]:
    """A hub with a 2 MiB upload limit (so 'oversized' is cheap to produce)."""
    env = {"PRIME_HUB_MAX_UPLOAD_BYTES": str(LIMIT)}
    with start_inproc_hub(tmp_path_factory.mktemp("hostile"), env) as running:
        yield running


def multipart(fields: dict[str, str], filename: str, data: bytes) -> tuple[bytes, str]:
    """A multipart body as twine sends it, with `filename` written verbatim (no escaping)."""
    boundary = "hubtestboundary7d3f"
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{key}"\r\n\r\n{value}\r\n'.encode()
        for key, value in fields.items()
    ]
    parts.append(
        f'--{boundary}\r\nContent-Disposition: form-data; name="content"; filename="{filename}"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n".encode("latin-1")
        + data
        + b"\r\n"
    )
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


def upload(http: Any, url: str, token: str, filename: str, data: bytes) -> Any:
    """POST to a twine endpoint through `http` (the httpx module, or an in-process client)."""
    fields = {
        ":action": "file_upload",
        "protocol_version": "1",
        "filetype": "bdist_wheel" if filename.endswith(".whl") else "sdist",
        "sha256_digest": hashlib.sha256(data).hexdigest(),
    }
    body, content_type = multipart(fields, filename, data)
    return http.post(
        url,
        auth=("__token__", token),
        content=body,
        headers={"Content-Type": content_type},
        **({"timeout": 60} if http is httpx else {}),  # a socket's timeout; in-process has none
    )


def stored_blobs(hub: HubAccounts) -> list[Path]:
    root = hub.data_dir / "blobs"
    # `.live-PID` marks a running worker's scratch directory (kept from sweeps), not data.
    return [p for p in root.rglob("*") if p.is_file() and not p.name.startswith(".live-")]


def table_counts(hub: HubAccounts) -> dict[str, int]:
    with sqlite3.connect(hub.data_dir / "hub.sqlite3") as db:
        return {
            table: db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in ("environment", "version", "distfile")
        }


def _zip_bomb() -> bytes:
    return wheel_bytes(
        "bomb-env", "0.1.0", extra_members={"bomb_env/zeros.bin": b"\0" * (40 * 1024 * 1024)}
    )


HOSTILE = {
    "zip bomb": ("bomb_env-0.1.0-py3-none-any.whl", _zip_bomb, "zip bomb"),
    "path traversal member": (
        "trav_env-0.1.0-py3-none-any.whl",
        lambda: wheel_bytes("trav-env", "0.1.0", extra_members={"../evil.py": b"x"}),
        "path traversal",
    ),
    "path traversal filename": (
        "../trav_env-0.1.0-py3-none-any.whl",
        lambda: wheel_bytes("trav-env", "0.1.0"),
        "",
    ),
    "control character in filename": (
        "ctrl\x07_env-0.1.0-py3-none-any.whl",
        lambda: wheel_bytes("ctrl-env", "0.1.0"),
        "control",
    ),
    "name differs from METADATA": (
        "meta_env-0.1.0-py3-none-any.whl",
        lambda: wheel_bytes("meta-env", "0.1.0", metadata_name="other-env"),
        "metadata says",
    ),
    "version differs from METADATA": (
        "meta_env-0.1.0-py3-none-any.whl",
        lambda: wheel_bytes("meta-env", "0.1.0", metadata_version="0.2.0"),
        "",
    ),
    "bad platform tag": (
        "tag_env-0.1.0-py3-none-bogus_os.whl",
        lambda: wheel_bytes("tag-env", "0.1.0"),
        "",
    ),
    "truncated zip": (
        "cut_env-0.1.0-py3-none-any.whl",
        lambda: wheel_bytes("cut-env", "0.1.0")[:-60],
        "",
    ),
    "doubled zip": (
        "dbl_env-0.1.0-py3-none-any.whl",
        lambda: wheel_bytes("dbl-env", "0.1.0") * 2,
        "",
    ),
    "oversized": (
        "big_env-0.1.0-py3-none-any.whl",
        lambda: wheel_bytes(
            "big-env",
            "0.1.0",
            extra_members={"big_env/noise.bin": __import__("os").urandom(LIMIT + 4096)},
        ),
        "limit",
    ),
    "local version": (
        "loc_env-0.1.0+dev-py3-none-any.whl",
        lambda: wheel_bytes("loc-env", "0.1.0+dev"),
        "local",
    ),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_upload_is_refused_and_leaves_nothing(small_hub: InProcessHub, case: str) -> None:
    token = small_hub.admin_token
    filename, make, expected = HOSTILE[case]
    response = upload(small_hub.http, f"{small_hub.url}/admin/legacy/", token, filename, make())
    assert response.status_code in (400, 413), (case, response.status_code, response.text)
    message = response.text.strip()
    assert expected.lower() in message.lower(), message
    assert "Traceback" not in message
    assert stored_blobs(small_hub) == []
    assert table_counts(small_hub) == {"environment": 0, "version": 0, "distfile": 0}


def test_twine_reads_the_refusal_in_the_reason_phrase(fresh_hub: HubProcess) -> None:
    """twine prints only the status line: the server puts the message there."""
    filename, make, expected = HOSTILE["path traversal member"]
    response = upload(
        httpx, f"{fresh_hub.url}/admin/legacy/", fresh_hub.admin_token, filename, make()
    )
    message = response.text.strip()
    assert response.status_code == 400 and expected in message
    assert response.reason_phrase.strip() == " ".join(message.split())[:400].strip()


def test_twenty_concurrent_uploads_store_exactly_one(fresh_inproc_hub: InProcessHub) -> None:
    fresh_hub = fresh_inproc_hub
    data = wheel_bytes("race-env", "1.0.0")
    filename = "race_env-1.0.0-py3-none-any.whl"
    url, token = f"{fresh_hub.url}/legacy/", fresh_hub.admin_token
    with ThreadPoolExecutor(20) as pool:
        responses = list(
            pool.map(lambda _: upload(fresh_hub.http, url, token, filename, data), range(20))
        )
    assert [r.status_code for r in responses] == [200] * 20, [r.text for r in responses]
    assert table_counts(fresh_hub) == {"environment": 1, "version": 1, "distfile": 1}
    sha = hashlib.sha256(data).hexdigest()
    names = sorted(p.name for p in stored_blobs(fresh_hub))
    assert sha in names and len([n for n in names if n == sha]) == 1


def _partial_request(port: int, head: str, body_part: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(head.encode() + body_part)
    return sock


def test_sigkill_mid_upload_leaves_no_partial_blob(fresh_hub: HubProcess) -> None:
    data = wheel_bytes("crash-env", "1.0.0", extra_members={"crash_env/blob.bin": b"x" * 8_000_000})
    boundary = "crashboundary"
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name=":action"\r\n\r\nfile_upload\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="protocol_version"\r\n\r\n1\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="filetype"\r\n\r\nbdist_wheel\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="sha256_digest"\r\n\r\n'
            f"{hashlib.sha256(data).hexdigest()}\r\n"
            f'--{boundary}\r\nContent-Disposition: form-data; name="content"; '
            f'filename="crash_env-1.0.0-py3-none-any.whl"\r\nContent-Type: application/octet-stream\r\n\r\n'
        ).encode()
        + data
        + f"\r\n--{boundary}--\r\n".encode()
    )
    import base64

    auth = base64.b64encode(f"__token__:{fresh_hub.admin_token}".encode()).decode()
    head = (
        f"POST /legacy/ HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Basic {auth}\r\n"
        f"Content-Type: multipart/form-data; boundary={boundary}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    legacy = _partial_request(fresh_hub.port, head, body[: len(body) // 2])
    # A REST upload caught mid-PUT as well.
    api = httpx.Client(
        base_url=fresh_hub.url, headers={"Authorization": f"Bearer {fresh_hub.admin_token}"}
    )
    env_id = api.post("/api/v1/environmentshub/resolve", json={"name": "crash-env"}).json()["data"][
        "id"
    ]
    reservation = api.post(
        f"/api/v1/environmentshub/{env_id}/wheels",
        json={"filename": "crash_env-1.0.0-py3-none-any.whl", "sha256": hashlib.sha256(data).hexdigest(),
              "size": len(data), "semantic_version": "1.0.0"},
    ).json()["data"]  # fmt: skip
    put_url = httpx.URL(reservation["upload_url"])
    put_head = (
        f"PUT {put_url.raw_path.decode()} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Length: {len(data)}\r\n\r\n"
    )
    rest = _partial_request(fresh_hub.port, put_head, data[: len(data) // 2])
    time.sleep(1.0)
    # What an interrupted atomic write leaves behind: temp files next to their targets.
    leftover = fresh_hub.data_dir / "blobs" / "sha256" / "ab" / "cd" / "abcd.tmp-1-ffff"
    leftover.parent.mkdir(parents=True, exist_ok=True)
    leftover.write_bytes(b"partial")
    fresh_hub.kill()
    legacy.close()
    rest.close()

    fresh_hub.start()
    assert stored_blobs(fresh_hub) == []
    assert table_counts(fresh_hub)["distfile"] == 0
    page = httpx.get(f"{fresh_hub.url}/admin/simple/crash-env/")
    assert page.status_code == 200 and ".whl" not in page.text
    # The interrupted push can be redone from scratch and then works.
    reservation = api.post(
        f"/api/v1/environmentshub/{env_id}/wheels",
        json={"filename": "crash_env-1.0.0-py3-none-any.whl", "sha256": hashlib.sha256(data).hexdigest(),
              "size": len(data), "semantic_version": "1.0.0"},
    ).json()["data"]  # fmt: skip
    assert httpx.put(reservation["upload_url"], content=data, timeout=60).status_code == 200
    done = api.post(f"/api/v1/environmentshub/{env_id}/wheels/{reservation['wheel_id']}/finalize")
    assert done.status_code == 200, done.text
    assert table_counts(fresh_hub)["distfile"] == 1


# One that fits in a chunk is checked in memory and written once; a larger one goes through a
# scratch file: both paths give the same answers.
SIZES = {"in memory": 0, "through a scratch file": 1_500_000}


@pytest.mark.parametrize("path", sorted(SIZES))
def test_a_wrong_digest_is_refused_and_leaves_nothing(
    fresh_inproc_hub: InProcessHub, path: str
) -> None:
    hub = fresh_inproc_hub
    data = wheel_bytes("dig-env", "1.0.0", extra_members={"dig_env/n.bin": os.urandom(SIZES[path])})
    fields = {":action": "file_upload", "protocol_version": "1", "filetype": "bdist_wheel",
              "sha256_digest": hashlib.sha256(data + b"!").hexdigest()}  # fmt: skip
    body, content_type = multipart(fields, "dig_env-1.0.0-py3-none-any.whl", data)
    response = hub.http.post(
        f"{hub.url}/admin/legacy/", auth=("__token__", hub.admin_token), content=body,
        headers={"Content-Type": content_type},
    )  # fmt: skip
    assert response.status_code == 400 and "digest" in response.text, response.text
    assert stored_blobs(hub) == []
    assert table_counts(hub) == {"environment": 0, "version": 0, "distfile": 0}


@pytest.mark.parametrize("path", sorted(SIZES))
def test_an_upload_is_stored_byte_for_byte(fresh_inproc_hub: InProcessHub, path: str) -> None:
    hub = fresh_inproc_hub
    data = wheel_bytes("big-env", "1.0.0", extra_members={"big_env/n.bin": os.urandom(SIZES[path])})
    response = upload(
        hub.http, f"{hub.url}/admin/legacy/", hub.admin_token,
        "big_env-1.0.0-py3-none-any.whl", data,
    )  # fmt: skip
    assert response.status_code == 200, response.text
    sha = hashlib.sha256(data).hexdigest()
    assert [(p.name, p.read_bytes() == data) for p in stored_blobs(hub)] == [(sha, True)]


# Refusals decided before the blob write (see `publishing.publish_file`): (the upload that
# comes first, if any: name and module source; the refused one: name, module source; expected
# status and message).
REFUSED_BEFORE_THE_WRITE = {
    "confusable with a neighbour": (("pre-env", "VALUE = 1\n"), ("preenv", "VALUE = 1\n"), 400,
                                    "too similar"),
    "standard-library name": (None, ("json", "VALUE = 1\n"), 400, "standard-library"),
    "same filename, other bytes": (("pre-env", "VALUE = 1\n"), ("pre-env", "VALUE = 2\n"), 400,
                                   "File already exists"),
}  # fmt: skip


@pytest.mark.parametrize("path", sorted(SIZES))
@pytest.mark.parametrize("case", sorted(REFUSED_BEFORE_THE_WRITE))
def test_a_refusal_decided_before_the_write_leaves_no_blob(
    fresh_inproc_hub: InProcessHub, case: str, path: str
) -> None:
    """The name and filename checks run before the blob write starts: the refused upload writes
    no blob and leaves no scratch file, in memory (< 1 MiB) and through a scratch file alike."""
    hub = fresh_inproc_hub
    url = f"{hub.url}/admin/legacy/"
    first, (name, source), status, expected = REFUSED_BEFORE_THE_WRITE[case]
    if first is not None:
        stored = upload(hub.http, url, hub.admin_token, "pre_env-1.0.0-py3-none-any.whl",
                        wheel_bytes(first[0], "1.0.0", module_source=first[1]))  # fmt: skip
        assert stored.status_code == 200, stored.text
    before = sorted(stored_blobs(hub)), table_counts(hub)
    noise = {f"{name.replace('-', '_')}/n.bin": os.urandom(SIZES[path])}
    data = wheel_bytes(name, "1.0.0", module_source=source, extra_members=noise)
    assert (len(data) < 1024 * 1024) == (path == "in memory")
    filename = f"{name.replace('-', '_')}-1.0.0-py3-none-any.whl"
    response = upload(hub.http, url, hub.admin_token, filename, data)
    assert response.status_code == status and expected in response.text, response.text
    assert (sorted(stored_blobs(hub)), table_counts(hub)) == before
