"""Issue 9, item 2: the hub bounds every request before it reads it.

In-process (create_app + raw ASGI calls that count the body bytes the app pulled) for the
route logic; a real `prime hub serve` only where the server itself is the point (uvicorn's
X-Forwarded-For handling, the access log).
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlmodel import Session, select

from hub_server.core import blobstore
from hub_server.core.blobstore import BlobStore
from hub_server.registry.models import DistFile, PendingUpload
from tests.hub_server.hardening_hub import HardenedHub
from tests.hub_server.hubproc import HubProcess, start_hub

GIB = 1024 * 1024 * 1024
RESOLVE = "/api/v1/environmentshub/resolve"


@pytest.fixture
def hub(tmp_path: Path) -> HardenedHub:
    return HardenedHub(
        tmp_path / "hub",
        max_upload_bytes=4 * 1024 * 1024,
        max_json_bytes=2 * 1024 * 1024,
        max_pending_uploads_per_user=3,
        max_staged_bytes_per_user=10 * 1024 * 1024,
    )


def test_unauthenticated_gigabyte_is_refused_before_reading(hub: HardenedHub) -> None:
    status, pulled = asyncio.run(hub.raw("POST", RESOLVE, body_size=GIB))
    assert (status, pulled) == (401, 0)


def test_chunked_unauthenticated_body_is_cut_at_the_anonymous_limit(hub: HardenedHub) -> None:
    status, pulled = asyncio.run(
        hub.raw("POST", RESOLVE, body_size=GIB, declare_length=False, chunk=16 * 1024)
    )
    assert status == 413
    assert pulled <= hub.settings.max_anonymous_body_bytes + 16 * 1024


def test_wrong_token_is_refused_before_reading(hub: HardenedHub) -> None:
    status, pulled = asyncio.run(hub.raw("POST", RESOLVE, token="phub_wrong", body_size=GIB))
    assert (status, pulled) == (401, 0)
    # A header that carries no token at all is anonymous, with the anonymous limit.
    status, pulled = asyncio.run(hub.raw("POST", RESOLVE, token="", body_size=GIB))
    assert (status, pulled) == (401, 0)


def test_json_route_body_limit_holds_for_declared_and_chunked(hub: HardenedHub) -> None:
    token = hub.tokens["alice"]
    status, pulled = asyncio.run(hub.raw("POST", RESOLVE, token=token, body_size=GIB))
    assert (status, pulled) == (413, 0)
    status, pulled = asyncio.run(
        hub.raw("POST", RESOLVE, token=token, body_size=GIB, declare_length=False)
    )
    assert status == 413
    assert pulled <= hub.settings.max_json_bytes + 1024 * 1024


def test_legacy_upload_with_read_token_is_refused_before_reading(hub: HardenedHub) -> None:
    read = hub.token("alice", ["read"])
    status, pulled = asyncio.run(
        hub.raw(
            "POST", "/legacy/", token=read, basic=True, body_size=GIB, declare_length=False,
            content_type="multipart/form-data; boundary=x",
        )
    )  # fmt: skip
    assert (status, pulled) == (403, 0)
    # An upload token for another owner is refused before reading too.
    status, pulled = asyncio.run(
        hub.raw(
            "POST", "/alice/legacy/", token=hub.tokens["bob"], basic=True, body_size=GIB,
            declare_length=False, content_type="multipart/form-data; boundary=x",
        )
    )  # fmt: skip
    assert (status, pulled) == (403, 0)


_MULTIPART_FILE = (
    b'--x\r\nContent-Disposition: form-data; name="content"; filename="w-1.0-py3-none-any.whl"'
    b"\r\nContent-Type: application/octet-stream\r\n\r\n"
)


def test_legacy_chunked_upload_is_cut_at_the_request_limit(hub: HardenedHub) -> None:
    status, pulled = asyncio.run(
        hub.raw(
            "POST", "/legacy/", token=hub.tokens["alice"], basic=True, body_size=GIB,
            declare_length=False, content_type="multipart/form-data; boundary=x",
            prefix=_MULTIPART_FILE,
        )
    )  # fmt: skip
    assert status == 413
    assert pulled <= hub.settings.request_body_limit + 1024 * 1024


def _reserve(client: httpx.Client | object, hub: HardenedHub, data: bytes, n: int = 0) -> dict:
    env_id = hub.env_ids["alice/wordle"]
    response = client.post(  # type: ignore[union-attr]
        f"/api/v1/environmentshub/{env_id}/versions",
        headers={"Authorization": f"Bearer {hub.tokens['alice']}"},
        json={
            "filename": f"wordle-{n}.tar.gz",
            "sha256": hashlib.sha256(data).hexdigest(),
            "size": len(data),
            "semantic_version": f"0.{n + 2}.0",
        },
    )
    assert response.status_code == 200, response.text
    return dict(response.json()["data"])


def test_one_put_per_upload_url_at_a_time_and_bounded(hub: HardenedHub) -> None:
    data = b"y" * (3 * 1024 * 1024)
    with hub.client() as client:
        reservation = _reserve(client, hub, data)
    path, _, query = reservation["upload_url"].partition("://")[2].partition("/")[2].partition("?")

    async def race() -> tuple[tuple[int, int], tuple[int, int]]:
        hold, held = asyncio.Event(), asyncio.Event()
        first = asyncio.create_task(
            hub.raw(
                "PUT", "/" + path, query=query, body_size=len(data), hold=hold, held=held,
                chunk=65536,
            )
        )  # fmt: skip
        waiting = asyncio.create_task(held.wait())
        await asyncio.wait({waiting, first}, return_when=asyncio.FIRST_COMPLETED)
        assert held.is_set(), f"the first PUT ended early: {first.result()}"
        # the first PUT has claimed the URL and is mid-body
        second = await hub.raw("PUT", "/" + path, query=query, body_size=len(data))
        hold.set()
        return await first, second

    first, second = asyncio.run(race())
    assert second == (409, 0)
    assert first[0] == 400  # the bytes (all 'x') differ from the announced sha256: refused
    # The claim is released: the URL takes the next upload.
    status, _ = asyncio.run(hub.raw("PUT", "/" + path, query=query, body_size=len(data)))
    assert status == 400


def test_a_dead_puts_claim_lapses_so_a_retry_after_a_restart_goes_through(
    hub: HardenedHub,
) -> None:
    """A worker killed mid-PUT never releases its claim; the short lease frees the URL."""
    from datetime import timedelta

    from hub_server.core.ids import utcnow

    data = b"z" * 1024
    with hub.client() as client:
        reservation = _reserve(client, hub, data)
    path, _, query = reservation["upload_url"].partition("://")[2].partition("/")[2].partition("?")
    upload_id = path.rsplit("/", 1)[-1]

    def claim_since(age: timedelta) -> None:
        with Session(hub.engine) as session:
            row = session.get(PendingUpload, upload_id)
            assert row is not None
            row.receiving_since = utcnow() - age
            session.add(row)
            session.commit()

    claim_since(timedelta(seconds=5))  # a live PUT, mid-body
    assert asyncio.run(hub.raw("PUT", "/" + path, query=query, body_size=len(data)))[0] == 409
    claim_since(timedelta(minutes=2))  # its worker died two minutes ago
    status, _ = asyncio.run(hub.raw("PUT", "/" + path, query=query, body_size=len(data)))
    assert status == 400  # taken and read (the bytes differ from the announced hash)


def test_put_larger_than_announced_stops_early(hub: HardenedHub) -> None:
    data = b"z" * 1000
    with hub.client() as client:
        reservation = _reserve(client, hub, data)
    path, _, query = reservation["upload_url"].partition("://")[2].partition("/")[2].partition("?")
    status, pulled = asyncio.run(
        hub.raw("PUT", "/" + path, query=query, body_size=GIB, declare_length=False, chunk=65536)
    )
    assert status == 413
    assert pulled <= 2 * 65536


def test_per_user_quota_on_pending_uploads(hub: HardenedHub) -> None:
    with hub.client() as client:
        for n in range(3):
            _reserve(client, hub, b"%d" % n, n)
        env_id = hub.env_ids["alice/wordle"]
        refused = client.post(
            f"/api/v1/environmentshub/{env_id}/versions",
            headers={"Authorization": f"Bearer {hub.tokens['alice']}"},
            json={"filename": "w.tar.gz", "sha256": "0" * 64, "semantic_version": "9.0.0"},
        )
        assert refused.status_code == 429
        assert "unfinished uploads" in refused.json()["detail"]


def test_per_user_quota_on_staged_bytes(tmp_path: Path) -> None:
    hub = HardenedHub(tmp_path, max_staged_bytes_per_user=1000)
    with hub.client() as client:
        env_id = hub.env_ids["alice/wordle"]
        body = {"filename": "w.tar.gz", "sha256": "0" * 64, "semantic_version": "1.0.0"}
        ok = client.post(
            f"/api/v1/environmentshub/{env_id}/versions",
            headers={"Authorization": f"Bearer {hub.tokens['alice']}"},
            json={**body, "size": 600},
        )
        assert ok.status_code == 200
        refused = client.post(
            f"/api/v1/environmentshub/{env_id}/versions",
            headers={"Authorization": f"Bearer {hub.tokens['alice']}"},
            json={**body, "size": 600},
        )
        assert refused.status_code == 429
        assert "quota" in refused.json()["detail"]


def test_abandoned_uploads_are_purged_while_running(tmp_path: Path) -> None:
    hub = HardenedHub(tmp_path, upload_url_ttl_seconds=1, sweep_interval_seconds=0.2)
    data = b"staged bytes"
    with hub.client() as client:
        reservation = _reserve(client, hub, data)
        put = client.put(reservation["upload_url"], content=data)
        assert put.status_code == 200
        staged = list((tmp_path / "blobs" / "staging").iterdir())
        assert len(staged) == 1

        def reservations() -> list[PendingUpload]:
            with Session(hub.engine) as session:
                return list(session.exec(select(PendingUpload)).all())

        # A sweep removes the staged file first and the row after it (a crash in between
        # leaves a row the next sweep drops, never a file without a row): wait for both.
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (staged[0].exists() or reservations()):
            time.sleep(0.1)
        assert not staged[0].exists()
        assert reservations() == []


def test_deep_json_sample_is_a_400_not_a_500(hub: HardenedHub) -> None:
    with hub.client() as client:
        auth = {"Authorization": f"Bearer {hub.tokens['alice']}"}
        created = client.post(
            "/api/v1/evaluations/",
            headers=auth,
            json={"name": "r", "environments": [{"slug": "alice/wordle"}], "model_name": "m"},
        )
        run = created.json()["evaluation_id"]
        for depth in (100_000, 200):
            deep = "[" * depth + "]" * depth
            body = '{"samples": [{"example_index": 0, "reward": 1, "info": ' + deep + "}]}"
            response = client.post(
                f"/api/v1/evaluations/{run}/samples",
                headers={**auth, "content-type": "application/json"},
                content=body,
            )
            assert response.status_code == 400, response.text
            assert "nested deeper" in response.json()["detail"]


# Another worker, as the store sees one: a process holding `tmp/.live-<its pid>` locked
# (what `BlobStore` does on open), via util-linux flock(1): cheap to start on a loaded host.
# It says "ready" only once the lock is held: flock(1) creates the file before it locks it,
# and a store opening in between would rightly take the worker for dead.
_WORKER = 'mkdir -p "$0" && exec flock "$0/.live-$$" sh -c "echo ready && exec sleep 120"'


def _wait_for_unlocked(path: Path, timeout: float = 30.0) -> None:
    """Wait until no process holds `path` locked: `wait()` reaps flock(1), but its killed
    child, which shares the lock, may exit (and so release it) a moment later."""
    deadline = time.monotonic() + timeout
    fd = os.open(path, os.O_RDWR)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                assert time.monotonic() < deadline, f"{path} is still locked after {timeout} s"
                time.sleep(0.01)
            else:
                fcntl.flock(fd, fcntl.LOCK_UN)
                return
    finally:
        os.close(fd)


def test_restarting_worker_keeps_other_workers_scratch_files(tmp_path: Path) -> None:
    root = str(tmp_path / "blobs")
    store = BlobStore(root)
    with store.scratch_file() as mine:
        mine.write(b"mine")
    worker = subprocess.Popen(
        ["sh", "-c", _WORKER, str(tmp_path / "blobs" / "tmp")],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,  # flock and its sleep (which shares the lock) die together
    )
    try:
        assert worker.stdout is not None and worker.stdout.readline().strip() == "ready"
        tmp = tmp_path / "blobs" / "tmp"
        theirs = tmp / f"upload.tmp-{worker.pid}-abc"
        # A crashed writer whose pid now belongs to another, unrelated process (pid 1).
        reused = tmp / "upload.tmp-1-def"
        for path in (theirs, reused):
            path.write_bytes(b"in flight")
        BlobStore(root)  # another worker (re)starting on the same store
        assert theirs.exists()
        assert Path(mine.name).exists()  # this process is alive too
        assert not reused.exists()
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()
        _wait_for_unlocked(tmp / f".live-{worker.pid}")
        BlobStore(root)
        assert not theirs.exists()  # its writer is gone now
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
        Path(mine.name).unlink(missing_ok=True)


def test_a_store_opening_between_a_workers_open_and_lock_does_not_hide_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race a loaded host widens: this worker has created `.live-PID` but not locked it yet
    when another store, cleaning up after an earlier process with this pid, checks it."""
    root = tmp_path / "blobs"
    real_flock = fcntl.flock

    def flock_after_another_store_looked(fd: int, operation: int) -> None:
        if operation == fcntl.LOCK_EX:
            monkeypatch.setattr(blobstore.fcntl, "flock", real_flock)
            assert not blobstore._writer_alive(root / "tmp", os.getpid())  # unlocked: "dead"
        real_flock(fd, operation)

    monkeypatch.setattr(blobstore.fcntl, "flock", flock_after_another_store_looked)
    store = BlobStore(str(root))
    try:
        with store.scratch_file() as mine:
            mine.write(b"mine")
        BlobStore(str(root))  # another worker (re)starting on the same store
        assert Path(mine.name).exists()
    finally:
        os.close(blobstore._LIVE_LOCKS.pop(str(root / "tmp" / f".live-{os.getpid()}")))


# -- the real server ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HubProcess]:
    env = {"PRIME_HUB_FAILED_LOGINS_PER_MINUTE": "3"}
    with start_hub(tmp_path_factory.mktemp("served"), env=env) as running:
        yield running


def test_upload_url_secret_is_not_in_the_access_log(served: HubProcess) -> None:
    token = served.add_user("logger")
    auth = {"Authorization": f"Bearer {token}"}
    resolved = httpx.post(
        f"{served.url}{RESOLVE}", headers=auth, json={"name": "logged"}, timeout=30
    ).json()["data"]
    data = b"bytes"
    reservation = httpx.post(
        f"{served.url}/api/v1/environmentshub/{resolved['id']}/versions",
        headers=auth,
        json={
            "filename": "logged-0.1.0.tar.gz",
            "sha256": hashlib.sha256(data).hexdigest(),
            "size": len(data),
            "semantic_version": "0.1.0",
        },
        timeout=30,
    ).json()["data"]
    secret = reservation["upload_url"].split("token=", 1)[1]
    assert httpx.put(reservation["upload_url"], content=data, timeout=30).status_code == 200
    deadline = time.monotonic() + 10
    log = ""
    while time.monotonic() < deadline and "/uploads/" not in log:
        log = served.log_path.read_text()
        time.sleep(0.1)
    assert "/uploads/" in log and "token=***" in log
    assert secret not in log
    assert json.dumps(secret)[1:-1] not in log
    assert os.environ.get("PRIME_API_KEY", "\0") not in log


def test_x_forwarded_for_is_not_believed_without_trusted_proxies(served: HubProcess) -> None:
    """Runs last on this server: it uses up loopback's failed-login budget."""
    statuses = []
    for n in range(5):
        response = httpx.get(
            f"{served.url}/api/v1/user/whoami",
            headers={"Authorization": "Bearer phub_guess", "X-Forwarded-For": f"127.0.1.{n}"},
        )
        statuses.append(response.status_code)
    assert statuses[:3] == [401, 401, 401]
    assert statuses[3:] == [429, 429]


def test_a_small_upload_is_authenticated_by_its_route_with_the_same_refusals(
    hub: HardenedHub,
) -> None:
    """A twine upload no larger than an anonymous body is read before its token is checked (in
    the route's own thread-pool hop): a wrong, missing or read-only token is still refused,
    even when the body is malformed too, and nothing is stored."""
    read = hub.token("alice", ["read"])
    small = hub.settings.max_anonymous_body_bytes
    stored = _file_count(hub)
    for token, status in (("phub_wrong", 401), (None, 401), (read, 403)):
        for prefix in (_MULTIPART_FILE, b"not a multipart body"):
            answer, pulled = asyncio.run(
                hub.raw(
                    "POST", "/alice/legacy/", token=token, basic=True, body_size=small,
                    content_type="multipart/form-data; boundary=x", prefix=prefix,
                )
            )  # fmt: skip
            assert answer == status, (token, prefix, answer)
            assert pulled <= small
    assert _file_count(hub) == stored


def _file_count(hub: HardenedHub) -> int:
    with Session(hub.engine) as session:
        return len(session.exec(select(DistFile)).all())
