"""Environment creation on a real database: confusable names versus a concurrent creation race."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from hub_server.accounts.admin import create_user, open_database
from hub_server.accounts.models import Owner
from hub_server.core.blobstore import BlobStore
from hub_server.core.errors import BadRequest
from hub_server.core.settings import HubSettings
from hub_server.registry.models import DistFile
from hub_server.registry.publishing import EnvTarget, NewFile, create_environment, publish_file
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


@pytest.mark.xfail(
    strict=True,
    reason="open: publish_file's _drop_unreferenced checks 'no row uses these bytes' and then "
    "deletes the blob, with nothing stopping a concurrent upload of the same bytes from "
    "committing in between (it found the blob present and did not write it again)",
)
def test_a_refused_upload_never_deletes_a_blob_a_concurrent_upload_committed(
    tmp_path: Path,
) -> None:
    """alice's upload of `raceenv` is refused inside its row transaction (too similar to her
    `race-env`) after its blob was written; bob's upload of the same bytes commits between
    alice's 'is the blob used?' look and her delete. bob's file must still have its bytes."""
    engine = open_database(HubSettings(data_dir=tmp_path))
    store = BlobStore(str(tmp_path / "blobs"))
    for name in ("alice", "bob"):
        create_user(engine, name)
    with Session(engine, expire_on_commit=False) as session:
        alice = session.exec(select(Owner).where(Owner.name == "alice")).one()
        bob = session.exec(select(Owner).where(Owner.name == "bob")).one()
        create_environment(session, alice, "race-env", visibility="public")
        session.commit()
    data = wheel_bytes("raceenv", "1.0.0")
    new = NewFile(
        filename="raceenv-1.0.0-py3-none-any.whl", kind="wheel",
        sha256=hashlib.sha256(data).hexdigest(), size=len(data), version="1.0.0",
    )  # fmt: skip
    delete = store.delete

    def bob_commits_first(key: str) -> None:
        publish_file(engine, store, EnvTarget(owner=bob, name="raceenv", absent=True), new,
                     data, bob.user_id)  # fmt: skip
        delete(key)

    store.delete = bob_commits_first  # type: ignore[method-assign]
    with pytest.raises(BadRequest, match="too similar"):
        publish_file(engine, store, EnvTarget(owner=alice, name="raceenv", absent=True), new,
                     data, alice.user_id)  # fmt: skip
    with Session(engine) as session:
        (bobs,) = session.exec(select(DistFile).where(DistFile.sha256 == new.sha256)).all()
    assert store.exists(bobs.blob_key)
