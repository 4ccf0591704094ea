"""Hostile inputs to the upload path: inputs that could get a 500, leave files behind or be
read before authentication, and races that could break a rule; then attacks that hold, pinned
where no other test covers them. Uploads go through the
in-memory path (< 1 MiB) and the scratch-file path alike where the difference could matter.

In-process (`create_app` behind a TestClient, or raw ASGI calls where the framing or a
disconnect is the point), as the other route-logic tests of the upload are; the PostgreSQL
cases run the app on a throwaway cluster (`services.postgres_cluster`)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import json
import os
import sqlite3
import tarfile
import threading
import zipfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session, select

from hub_server.core.errors import BadRequest
from hub_server.registry import publishing
from hub_server.registry.models import Environment
from hub_server.registry.publishing import EnvTarget, NewFile, publish_file
from tests.hub_server.hardening_hub import HardenedHub
from tests.hub_server.index.test_upload_refusals import _body as _refusals_body
from tests.hub_server.index.test_upload_refusals import _written
from tests.hub_server.index.test_upload_safety import SIZES, multipart, stored_blobs, table_counts
from tests.hub_server.inproc import InProcessHub
from tests.hub_server.registry.test_publishing import (
    _new_file,
    _race_setup,
    _uid,
    _WhileAlicesBlobIsWritten,
)
from tests.hub_server.services import postgres_bin, postgres_cluster
from tests.hub_server.wheels import wheel_bytes
from tests.support import require

_NOTHING = {"environment": 0, "version": 0, "distfile": 0}
_JSON = "application/vnd.pypi.simple.v1+json"


def _fields(filename: str, data: bytes, **extra: str) -> dict[str, str]:
    """The form fields of a twine upload of `data` as `filename` (with its true digest)."""
    return {
        ":action": "file_upload",
        "protocol_version": "1",
        "filetype": "bdist_wheel" if filename.endswith(".whl") else "sdist",
        "sha256_digest": hashlib.sha256(data).hexdigest(),
        **extra,
    }


def _post(hub: InProcessHub, fields: dict[str, str], filename: str, data: bytes) -> Any:
    body, content_type = multipart(fields, filename, data)
    return hub.http.post(
        f"{hub.url}/admin/legacy/", auth=("__token__", hub.admin_token), content=body,
        headers={"Content-Type": content_type},
    )  # fmt: skip


def _nothing_written(hub: InProcessHub) -> None:
    """No blob stored and no row written: what a refused upload leaves."""
    assert stored_blobs(hub) == []
    assert table_counts(hub) == _NOTHING


def _refused_before_writing(hub: InProcessHub, response: Any, expected: str) -> None:
    """A 400 whose text names `expected`, and nothing written."""
    assert response.status_code == 400, response.text
    assert expected in response.text
    _nothing_written(hub)


@pytest.mark.parametrize("path", sorted(SIZES))
@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("sha256_digest", "\u00e9" * 64),
        ("blake2_256_digest", "\u00ff" * 64),
        ("md5_digest", "\u2603"),
    ],
    ids=["sha256", "blake2", "md5"],
)
def test_a_digest_that_is_not_ascii_is_refused_and_leaves_nothing(
    fresh_inproc_hub: InProcessHub, path: str, field: str, value: str
) -> None:
    """Was a 500 (hmac.compare_digest raises TypeError on non-ASCII str), and on the scratch
    path the scratch file stayed in the store's tmp/ (removed only at a restart, or after a day):
    an authenticated client could leave up to 100 MiB there per request."""
    hub = fresh_inproc_hub
    noise = {"dig_env/n.bin": os.urandom(SIZES[path])}
    data = wheel_bytes("dig-env", "1.0.0", extra_members=noise)
    filename = "dig_env-1.0.0-py3-none-any.whl"
    response = _post(hub, _fields(filename, data, **{field: value}), filename, data)
    _refused_before_writing(hub, response, "digest")


# Longer than the columns they go to (environment.name 128, requires_python 256): SQLite stored
# them, PostgreSQL refused the insert with a 500 after the blob write had begun (an
# unreferenced blob per request). `prime env push` refused such a name already (at resolve).
TOO_LONG = {
    "project name": ("n" * 129, {}, "129 characters"),
    "Requires-Python": (
        "rp-env",
        {"requires_python": ">=3.8," + ",".join(f"!=3.9.{i}" for i in range(40))},
        "Requires-Python",
    ),
}


@pytest.mark.parametrize("case", sorted(TOO_LONG))
def test_a_value_longer_than_its_column_is_refused_before_the_blob_write(
    fresh_inproc_hub: InProcessHub, case: str
) -> None:
    hub = fresh_inproc_hub
    name, options, expected = TOO_LONG[case]
    data = wheel_bytes(name, "1.0.0", **options)  # type: ignore[arg-type]
    filename = f"{name.replace('-', '_')}-1.0.0-py3-none-any.whl"
    response = _post(hub, _fields(filename, data), filename, data)
    _refused_before_writing(hub, response, expected)


@pytest.mark.parametrize(
    "options",
    [{"summary": "a\x00b"}, {"extra_metadata": ("Keywords: a\x00b,c",)}],
    ids=["summary", "keywords"],
)
def test_a_nul_in_the_metadata_is_refused_before_anything_is_written(
    fresh_inproc_hub: InProcessHub, options: dict[str, object]
) -> None:
    """PostgreSQL text cannot hold a NUL: a Summary or Keywords with one (packaging accepts
    both) was a 500 from the insert after the blob write had begun; SQLite stored it."""
    hub = fresh_inproc_hub
    data = wheel_bytes("nul-env", "1.0.0", **options)  # type: ignore[arg-type]
    filename = "nul_env-1.0.0-py3-none-any.whl"
    response = _post(hub, _fields(filename, data), filename, data)
    _refused_before_writing(hub, response, "NUL")


@pytest.mark.parametrize("size", ["small", "large"])
def test_a_body_cut_off_by_a_disconnect_is_a_400_not_an_application_error(
    tmp_path: Path, size: str
) -> None:
    """A client that goes away mid-body (declared Content-Length, half of it sent, then
    `http.disconnect`: an interrupted `twine upload`) made Starlette raise ClientDisconnect
    out of the route: a 500 and, under uvicorn, an 'Exception in ASGI application' traceback
    in the log per interrupted upload. Nobody is left to read the answer; it is a plain 400
    and nothing is written, on the small (route-authenticated) and the large path alike."""
    hub = HardenedHub(tmp_path / "hub")
    body, content_type = _refusals_body("cut-env", size)
    status, pulled = asyncio.run(_cut_off(hub, body, content_type, hub.tokens["alice"]))
    assert (status, pulled) == (400, len(body) // 2)
    assert _written(hub)[:2] == (0, 0)


async def _cut_off(hub: HardenedHub, body: bytes, content_type: str, token: str) -> tuple[int, int]:
    """POST half of `body` (declaring all of it) to /alice/legacy/, then disconnect; (status,
    body bytes sent). Raises what the app raises."""
    credentials = base64.b64encode(f"__token__:{token}".encode())
    headers = [
        (b"content-type", content_type.encode()),
        (b"content-length", str(len(body)).encode()),
        (b"authorization", b"Basic " + credentials),
    ]
    messages = [{"type": "http.request", "body": body[: len(body) // 2], "more_body": True}]

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    status = await hub.send_raw("POST", "/alice/legacy/", headers, receive)
    return status, len(body) // 2


_RESOLVE = "/api/v1/environmentshub/resolve"


@pytest.mark.parametrize("token", ["phub_wrong", None], ids=["wrong token", "no token"])
def test_an_unframed_body_to_a_rest_route_is_bounded_before_authentication(
    tmp_path: Path, token: str | None
) -> None:
    """A body with neither Content-Length nor Transfer-Encoding (an HTTP/2 server may deliver
    one so) was not seen as a body by the request-limits middleware: no token check and no
    anonymous limit, so FastAPI read and parsed up to max_json_bytes (~33 MiB) of JSON before
    the route's 401 (8 MiB measured, pulled whole). 962924f fixed this for the twine route
    only. A wrong token is now a 401 unread; no token gets the anonymous limit."""
    hub = HardenedHub(tmp_path / "hub")
    status, pulled = asyncio.run(_unframed(hub, _RESOLVE, token, 8 * 1024 * 1024))
    if token is not None:
        assert (status, pulled) == (401, 0)
    else:
        assert status in (401, 413)
        assert pulled <= hub.settings.max_anonymous_body_bytes + _PIECE


def test_an_unframed_body_with_a_good_token_is_still_served(tmp_path: Path) -> None:
    hub = HardenedHub(tmp_path / "hub")
    body = json.dumps({"name": "unframed-env"}).encode()
    status, _ = asyncio.run(_unframed(hub, _RESOLVE, hub.tokens["alice"], len(body), body))
    assert status == 200


_PIECE = 64 * 1024


async def _unframed(
    hub: HardenedHub, path: str, token: str | None, size: int, body: bytes | None = None
) -> tuple[int, int]:
    """POST `size` bytes (`body`, or a JSON string that long) to `path` in 64 KiB messages,
    with no Content-Length or Transfer-Encoding; (status, body bytes the app pulled)."""
    data = body if body is not None else b'{"name": "' + b"x" * size + b'"}'
    headers = [(b"content-type", b"application/json")]
    if token is not None:
        headers.append((b"authorization", b"Bearer " + token.encode()))
    pulled = 0

    async def receive() -> dict[str, Any]:
        nonlocal pulled
        piece = data[pulled : pulled + _PIECE]
        pulled += len(piece)
        return {"type": "http.request", "body": piece, "more_body": pulled < len(data)}

    status = await hub.send_raw("POST", path, headers, receive, http_version="2")
    return status, pulled


# --- attacks that held, pinned where no other test covers them -----------------------------

_PAD = 1_200_000  # random bytes: takes an archive past the 1 MiB in-memory bound
_MiB = 1024 * 1024


def _sdist(name: str, pad: int, *, pkg_info: str | None = None, top: str | None = None,
           link: str | None = None) -> bytes:  # fmt: skip
    """An sdist `name-1.0.0.tar.gz` (PKG-INFO, a module, `pad` random bytes), or a variant."""
    top = top or f"{name}-1.0.0"
    meta = (
        pkg_info
        if pkg_info is not None
        else f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0.0\n"
    )
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for path, data in ((f"{top}/PKG-INFO", meta.encode()), (f"{top}/m.py", b"x = 1\n"),
                           (f"{top}/pad.bin", os.urandom(pad))):  # fmt: skip
            info = tarfile.TarInfo(path)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        if link is not None:
            info = tarfile.TarInfo(f"{top}/link")
            info.type, info.linkname = tarfile.SYMTYPE, link
            archive.addfile(info)
    return buffer.getvalue()


def _wheel_with_bad_record(pad: int) -> bytes:
    """A wheel whose module does not match its RECORD hash (modified after it was built)."""
    data = wheel_bytes("par-env", "1.0.0", extra_members={"par_env/pad.bin": os.urandom(pad)})
    source = io.BytesIO(data)
    out = io.BytesIO()
    with zipfile.ZipFile(source) as original, zipfile.ZipFile(out, "w") as copy:
        for info in original.infolist():
            member = original.read(info)
            copy.writestr(
                info, b"VALUE = 2\n" if info.filename == "par_env/__init__.py" else member
            )
    return out.getvalue()


_WHEEL = "par_env-1.0.0-py3-none-any.whl"
_SDIST = "par_env-1.0.0.tar.gz"
# Hostile archives (filename, builder of the bytes with `pad` random bytes inside, a word of
# the expected message); the wheel cases of test_upload_safety.HOSTILE run in memory only.
PARITY: dict[str, tuple[str, Callable[[int], bytes], str]] = {
    "wheel: RECORD hash mismatch": (_WHEEL, _wheel_with_bad_record, "RECORD"),
    "wheel: METADATA name differs": (
        _WHEEL,
        lambda pad: wheel_bytes(
            "par-env",
            "1.0.0",
            metadata_name="other-env",
            extra_members={"par_env/pad.bin": os.urandom(pad)},
        ),
        "metadata says",
    ),
    "wheel: member path traversal": (
        _WHEEL,
        lambda pad: wheel_bytes(
            "par-env",
            "1.0.0",
            extra_members={"../evil.py": b"x", "par_env/pad.bin": os.urandom(pad)},
        ),
        "path traversal",
    ),
    "sdist: symlink out of its tree": (
        _SDIST,
        lambda pad: _sdist("par_env", pad, link="../../etc/passwd"),
        "points outside",
    ),
    "sdist: member outside the top directory": (
        _SDIST,
        lambda pad: _sdist("par_env", pad, top="elsewhere"),
        "outside the top-level",
    ),
    "sdist: PKG-INFO version differs": (
        _SDIST,
        lambda pad: _sdist(
            "par_env", pad, pkg_info="Metadata-Version: 2.1\nName: par-env\nVersion: 2.0\n"
        ),
        "says version",
    ),
    "sdist: not gzip": (
        _SDIST,
        lambda pad: b"PK" + os.urandom(max(pad, 100)),
        "not a valid .tar.gz",
    ),
}


@pytest.mark.parametrize("case", sorted(PARITY))
def test_a_hostile_archive_gets_the_same_answer_in_memory_and_through_a_scratch_file(
    fresh_inproc_hub: InProcessHub, case: str
) -> None:
    hub = fresh_inproc_hub
    filename, build, expected = PARITY[case]
    answers = []
    for pad in (0, _PAD):
        data = build(pad)
        assert (len(data) >= _MiB) == (pad > 0)
        response = _post(hub, _fields(filename, data), filename, data)
        answers.append((response.status_code, response.text))
    assert answers[0] == answers[1], answers
    assert answers[0][0] == 400 and expected in answers[0][1], answers[0]
    _nothing_written(hub)


@pytest.mark.parametrize("pad", [0, _PAD], ids=["in memory", "through a scratch file"])
def test_an_sdist_is_stored_and_advertises_no_metadata_file(
    fresh_inproc_hub: InProcessHub, pad: int
) -> None:
    """PEP 658 is for wheels: an sdist gets no metadata row, the index advertises none (HTML
    and JSON) and `<sdist>.metadata` is a 404."""
    hub = fresh_inproc_hub
    data = _sdist("sd_env", pad)
    response = _post(hub, _fields("sd_env-1.0.0.tar.gz", data), "sd_env-1.0.0.tar.gz", data)
    assert response.status_code == 200, response.text
    page = hub.http.get("/admin/simple/sd-env/", headers={"Accept": _JSON}).json()
    (entry,) = page["files"]
    assert entry["core-metadata"] is False and entry["dist-info-metadata"] is False
    assert "data-core-metadata" not in hub.http.get("/admin/simple/sd-env/").text
    assert hub.http.get("/admin/files/sd-env/sd_env-1.0.0.tar.gz.metadata").status_code == 404
    download = hub.http.get("/admin/files/sd-env/sd_env-1.0.0.tar.gz")
    assert download.content == data
    assert _rows_agree_with_the_store(hub) == 1


def test_concurrent_uploads_of_one_filename_with_other_bytes_store_exactly_one(
    fresh_inproc_hub: InProcessHub,
) -> None:
    """Eight clients upload `race_env-1.0.0…whl`, each with other bytes (half in memory, half
    through a scratch file), at once: one 200, seven 400 'File already exists', and the row,
    its metadata row and its blob agree; no scratch file is left."""
    hub = fresh_inproc_hub
    datas = [
        wheel_bytes("race-env", "1.0.0", module_source=f"VALUE = {n}\n",
                    extra_members={"race_env/pad.bin": os.urandom(_PAD if n % 2 else 0)})
        for n in range(8)
    ]  # fmt: skip
    barrier = threading.Barrier(len(datas))

    def one(data: bytes) -> tuple[int, str]:
        filename = "race_env-1.0.0-py3-none-any.whl"
        fields = _fields(filename, data)
        barrier.wait()
        response = _post(hub, fields, filename, data)
        return response.status_code, response.text

    with ThreadPoolExecutor(len(datas)) as pool:
        answers = list(pool.map(one, datas))
    assert sorted(status for status, _ in answers) == [200] + [400] * 7, answers
    assert all("File already exists" in text for status, text in answers if status == 400)
    assert _rows_agree_with_the_store(hub) == 1
    assert not [p for p in stored_blobs(hub) if p.parent.name == "tmp"]


def test_one_wheel_uploaded_by_two_owners_at_once_is_stored_for_both(
    fresh_inproc_hub: InProcessHub,
) -> None:
    """The same bytes under two owners (one content-addressed blob): both uploads succeed,
    each owner gets its own rows and metadata row, and both rows read the one blob."""
    hub = fresh_inproc_hub
    bob = hub.add_user("bob")
    data = wheel_bytes(
        "shared-env", "1.0.0", extra_members={"shared_env/pad.bin": os.urandom(_PAD)}
    )
    filename = "shared_env-1.0.0-py3-none-any.whl"
    body, content_type = multipart(_fields(filename, data), filename, data)
    barrier = threading.Barrier(6)

    def one(owner_and_token: tuple[str, str]) -> int:
        owner, token = owner_and_token
        barrier.wait()
        response = hub.http.post(
            f"{hub.url}/{owner}/legacy/", auth=("__token__", token), content=body,
            headers={"Content-Type": content_type},
        )  # fmt: skip
        return response.status_code

    with ThreadPoolExecutor(6) as pool:
        statuses = list(pool.map(one, [("admin", hub.admin_token), ("bob", bob)] * 3))
    assert statuses == [200] * 6
    assert _rows_agree_with_the_store(hub) == 2
    sha = hashlib.sha256(data).hexdigest()
    assert [p.name for p in stored_blobs(hub) if p.parent.name != "tmp"] == [sha]


def _rows_agree_with_the_store(hub: InProcessHub) -> int:
    """Check that every file row's blob holds its bytes and every advertised metadata hash has
    its metadata row; the number of file rows."""
    with sqlite3.connect(hub.data_dir / "hub.sqlite3") as db:
        rows = db.execute(
            "SELECT d.sha256, d.blob_key, d.metadata_sha256, m.raw FROM distfile d "
            "LEFT JOIN filemetadata m ON m.file_id = d.id"
        ).fetchall()
    for sha256, blob_key, metadata_sha256, raw in rows:
        blob = hub.data_dir / "blobs" / blob_key
        assert hashlib.sha256(blob.read_bytes()).hexdigest() == sha256
        if metadata_sha256 is not None:
            assert hashlib.sha256(raw).hexdigest() == metadata_sha256
    return len(rows)


@pytest.fixture(scope="module")
def pg_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HardenedHub]:
    """The hardening hub in-process on a throwaway PostgreSQL cluster."""
    require(postgres_bin() is not None, "PostgreSQL (Debian package postgresql)")
    with postgres_cluster() as url:
        hub = HardenedHub(tmp_path_factory.mktemp("pg") / "hub", database_url=url)
        try:
            yield hub
        finally:
            hub.engine.dispose()


@pytest.mark.postgres
@pytest.mark.parametrize(
    "method,path",
    [
        ("POST", "/a%00b/legacy/"),
        ("GET", "/alice%00/simple/"),
        ("GET", "/alice/simple/word%00le/"),
        ("GET", "/alice/files/wordle/w%00.whl"),
    ],
)
def test_a_nul_in_the_url_path_is_a_400_on_postgres(
    pg_hub: HardenedHub, method: str, path: str
) -> None:
    """A %00 in a path parameter (the twine route's owner, a project, a filename) reached a
    query, and PostgreSQL refuses a NUL in a text parameter: a 500 on every route."""
    body, content_type = _refusals_body("pg-env", "small")
    with pg_hub.client() as client:
        response = client.request(
            method, path, auth=("__token__", pg_hub.tokens["alice"]),
            content=body if method == "POST" else None,
            headers={"Content-Type": content_type} if method == "POST" else None,
        )  # fmt: skip
    assert response.status_code == 400, response.text
    assert "NUL" in response.text


def test_a_confusable_name_committed_while_an_upload_is_in_flight_refuses_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """alice uploads a new `raceenv`; while its blob is written (its name check passed, no row
    written yet) her second client commits `race-env`, a confusable neighbour. Her first
    upload must then be refused ('too similar'), not create the second of a confusable pair:
    the check ran only before the namespace's lock, so both names were created."""
    engine, store, alice, _bob = _race_setup(tmp_path, "unrelated-env")
    data, other = wheel_bytes("raceenv", "1.0.0"), wheel_bytes("race-env", "1.0.0")

    def second_client_commits() -> None:
        new = NewFile(
            filename="race_env-1.0.0-py3-none-any.whl", kind="wheel",
            sha256=hashlib.sha256(other).hexdigest(), size=len(other), version="1.0.0",
        )  # fmt: skip
        target = EnvTarget(owner=alice, name="race-env", absent=True)
        publish_file(engine, store, target, new, other, _uid(alice))

    monkeypatch.setattr(
        publishing, "_BLOB_WRITERS", _WhileAlicesBlobIsWritten(second_client_commits)
    )
    with pytest.raises(BadRequest, match="too similar"):
        publish_file(
            engine, store, EnvTarget(owner=alice, name="raceenv", absent=True),
            _new_file(data), data, _uid(alice),
        )  # fmt: skip
    with Session(engine) as session:
        names = sorted(env.name for env in session.exec(select(Environment)).all())
    assert names == ["race-env", "unrelated-env"]


def test_concurrent_uploads_of_confusable_new_names_create_one(
    fresh_inproc_hub: InProcessHub,
) -> None:
    """Four new, mutually confusable names uploaded at once in one namespace (measured before:
    three of them created in 15 rounds out of 15)."""
    hub = fresh_inproc_hub
    names = ["conf-env", "c0nf-env", "confenv", "c0nfenv"]
    barrier = threading.Barrier(len(names))

    def one(name: str) -> int:
        data = wheel_bytes(name, "1.0.0")
        filename = f"{name.replace('-', '_')}-1.0.0-py3-none-any.whl"
        fields = _fields(filename, data)
        barrier.wait()
        return _post(hub, fields, filename, data).status_code

    for _round in range(3):
        with ThreadPoolExecutor(len(names)) as pool:
            statuses = list(pool.map(one, names))
        assert sorted(statuses) == [200, 400, 400, 400], statuses  # later rounds: a re-upload
        assert table_counts(hub)["environment"] == 1


def test_confusable_new_names_from_twine_and_resolve_at_once_create_one(
    fresh_inproc_hub: InProcessHub,
) -> None:
    """The same race between `twine upload` and `prime env push`'s resolve (which creates the
    environment with `create_environment`): one name is created, the others refused."""
    hub = fresh_inproc_hub
    api = hub.client(hub.admin_token)
    names = ["mix-env", "m1x-env", "mixenv", "m1xenv"]
    barrier = threading.Barrier(len(names))

    def one(name: str) -> int:
        data = wheel_bytes(name, "1.0.0")
        filename = f"{name.replace('-', '_')}-1.0.0-py3-none-any.whl"
        fields = _fields(filename, data)
        barrier.wait()
        if name.endswith("-env"):
            return _post(hub, fields, filename, data).status_code
        return api.post("/api/v1/environmentshub/resolve", json={"name": name}).status_code

    with ThreadPoolExecutor(len(names)) as pool:
        statuses = list(pool.map(one, names))
    assert sorted(statuses) == [200, 400, 400, 400], statuses
    assert table_counts(hub)["environment"] == 1
