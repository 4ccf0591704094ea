"""Publishing on a real database: confusable names versus a concurrent creation race, and
refused uploads never deleting a content blob a concurrent upload relies on."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from hub_server.accounts.models import Owner
from hub_server.admin import create_user, open_database
from hub_server.core.blobstore import BlobStore, content_key
from hub_server.core.errors import BadRequest, FileExists
from hub_server.core.settings import HubSettings
from hub_server.registry import publishing
from hub_server.registry.models import DistFile
from hub_server.registry.publishing import (
    EnvTarget,
    NewFile,
    PublishResult,
    create_environment,
    publish_file,
)
from tests.hub_server.wheels import wheel_bytes


def test_the_same_name_created_concurrently_is_a_race_not_a_confusable(tmp_path: Path) -> None:
    """On Postgres (READ COMMITTED) a transaction that found no `race-env` can see one that a
    concurrent upload committed since; that must end on the unique constraint (the uploader
    retries and finds the winner), not as a 400 'too similar'."""
    engine = open_database(HubSettings(data_dir=tmp_path))
    create_user(engine, "rita")
    with Session(engine) as session:
        owner = session.exec(select(Owner).where(Owner.name == "rita")).one()
        create_environment(session, owner, "race-env", visibility="public")
        session.commit()

    with Session(engine) as session:
        owner = session.exec(select(Owner).where(Owner.name == "rita")).one()
        with pytest.raises(IntegrityError):
            create_environment(session, owner, "Race_Env", visibility="public")
    with Session(engine) as session:
        owner = session.exec(select(Owner).where(Owner.name == "rita")).one()
        with pytest.raises(BadRequest, match="too similar"):
            create_environment(session, owner, "raceenv", visibility="public")


def _race_setup(tmp_path: Path, alices: str) -> tuple[Engine, BlobStore, Owner, Owner]:
    """A database with users alice (with an environment named `alices`) and bob, and a store."""
    engine = open_database(HubSettings(data_dir=tmp_path))
    store = BlobStore(str(tmp_path / "blobs"))
    for name in ("alice", "bob"):
        create_user(engine, name)
    with Session(engine, expire_on_commit=False) as session:
        alice = session.exec(select(Owner).where(Owner.name == "alice")).one()
        bob = session.exec(select(Owner).where(Owner.name == "bob")).one()
        create_environment(session, alice, alices, visibility="public")
        session.commit()
    return engine, store, alice, bob


def _uid(owner: Owner) -> str:
    assert owner.user_id is not None  # a user's own namespace
    return owner.user_id


def _new_file(data: bytes) -> NewFile:
    return NewFile(
        filename="raceenv-1.0.0-py3-none-any.whl", kind="wheel",
        sha256=hashlib.sha256(data).hexdigest(), size=len(data), version="1.0.0",
    )  # fmt: skip


def test_a_refused_upload_never_deletes_a_blob_a_concurrent_upload_committed(
    tmp_path: Path,
) -> None:
    """alice's upload of `raceenv` is refused (too similar to her `race-env`); bob's upload of
    the same bytes commits while her refused upload is still in flight. bob's file must still
    have its bytes. The refusal is decided before alice's blob write, so she writes nothing
    and deletes nothing; before that, she wrote the blob, found no row using it and deleted
    it, and bob's commit in between (his upload found the blob present and wrote nothing)
    was left pointing at a deleted blob: `store.delete` injects bob's commit there."""
    engine, store, alice, bob = _race_setup(tmp_path, "race-env")
    data = wheel_bytes("raceenv", "1.0.0")
    new = _new_file(data)
    bobs: list[PublishResult] = []

    def bob_publishes() -> None:
        if not bobs:
            target = EnvTarget(owner=bob, name="raceenv", absent=True)
            bobs.append(publish_file(engine, store, target, new, data, _uid(bob)))

    delete = store.delete

    def bob_commits_first(key: str) -> None:
        bob_publishes()
        delete(key)

    store.delete = bob_commits_first  # type: ignore[method-assign]
    with pytest.raises(BadRequest, match="too similar"):
        publish_file(engine, store, EnvTarget(owner=alice, name="raceenv", absent=True), new,
                     data, _uid(alice))  # fmt: skip
    assert not bobs and not store.exists(content_key(new.sha256))  # nothing written or deleted
    bob_publishes()
    with Session(engine) as session:
        (file,) = session.exec(select(DistFile).where(DistFile.sha256 == new.sha256)).all()
    assert file.id == bobs[0].file_id
    with store.open(file.blob_key) as handle:
        assert handle.read() == data


class _WhileAlicesBlobIsWritten:
    """The upload executor of `publishing`, running `race` (once) just after the first blob
    write it is given has stored its blob: in the uploader's thread, inside its transaction,
    before its first row is written."""

    def __init__(self, race: Callable[[], None]) -> None:
        self._real = publishing._BLOB_WRITERS
        self._race: Callable[[], None] | None = race

    def submit(self, fn: Callable[..., None], *args: object) -> Future[None]:
        future = self._real.submit(fn, *args)
        race, self._race = self._race, None
        if race is not None:
            future.result()
            race()
        return future


def test_a_race_lost_after_the_blob_write_began_keeps_the_blob(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """alice's second client commits `raceenv-1.0.0…whl` with other bytes while her first
    client's blob is being written: the first is refused ('File already exists') after its
    write (only a race lost meanwhile can refuse it that late). Its blob is kept (and logged), not
    deleted: another upload of the same bytes, in any worker, may rely on it; bob's upload
    of them afterwards finds it and writes nothing."""
    engine, store, alice, bob = _race_setup(tmp_path, "raceenv")
    data, other = wheel_bytes("raceenv", "1.0.0"), wheel_bytes("raceenv", "1.0.0", summary="B")
    new = _new_file(data)
    key = content_key(new.sha256)

    def second_client_commits() -> None:
        publish_file(engine, store, EnvTarget(owner=alice, name="raceenv"), _new_file(other),
                     other, _uid(alice))  # fmt: skip

    monkeypatch.setattr(
        publishing, "_BLOB_WRITERS", _WhileAlicesBlobIsWritten(second_client_commits)
    )
    deleted: list[str] = []
    monkeypatch.setattr(store, "delete", deleted.append)
    with caplog.at_level(logging.INFO, logger=publishing.__name__), pytest.raises(FileExists):
        publish_file(engine, store, EnvTarget(owner=alice, name="raceenv"), new, data,
                     _uid(alice))  # fmt: skip
    assert deleted == [] and store.exists(key)
    assert any("kept blob " + key in record.getMessage() for record in caplog.records)
    written: list[str] = []
    monkeypatch.setattr(store, "put_bytes", lambda _data, key: written.append(key))
    result = publish_file(engine, store, EnvTarget(owner=bob, name="raceenv", absent=True), new,
                          data, _uid(bob))  # fmt: skip
    # bob's upload writes nothing (the stub): his row relies on the blob alice's kept
    assert result.created and written == [key]
    with store.open(key) as handle:
        assert handle.read() == data
