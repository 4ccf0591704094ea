"""A wheel's PEP 658 metadata is a row of the upload's own transaction (migration hub_0005),
not a second blob: the index advertises its hash and serves the exact bytes, and a file stored
before hub_0005 (metadata in a blob of its own) is still served the same way."""

from __future__ import annotations

import hashlib
from pathlib import Path
from urllib.parse import urljoin

from alembic import command
from fastapi.testclient import TestClient
from sqlmodel import Session, select

from hub_server.admin import open_database
from hub_server.app import create_app
from hub_server.core.blobstore import BlobStore, content_key
from hub_server.core.db import alembic_config, migrate
from hub_server.registry.models import DistFile, FileMetadata
from tests.hub_server.inproc import InProcessHub, start_inproc_hub
from tests.hub_server.wheels import twine_upload_form, wheel_bytes

_JSON = "application/vnd.pypi.simple.v1+json"


def _upload(hub: InProcessHub, token: str, name: str) -> str:
    """Upload `name` 1.0.0 with twine's form; its wheel's filename."""
    fields, files = twine_upload_form(name, "1.0.0", wheel_bytes(name, "1.0.0"))
    response = hub.client().post("/legacy/", auth=("__token__", token), data=fields, files=files)
    assert response.status_code == 200, response.text
    return str(files["content"][0])


def _advertised_and_served(hub: InProcessHub, owner: str, name: str) -> tuple[str, bytes]:
    page = hub.http.get(f"/{owner}/simple/{name}/", headers={"Accept": _JSON}).json()
    (entry,) = page["files"]
    served = hub.http.get(urljoin(f"/{owner}/simple/{name}/", entry["url"] + ".metadata"))
    assert served.status_code == 200, served.text
    assert served.headers["etag"] == f'"{entry["core-metadata"]["sha256"]}"'
    return str(entry["core-metadata"]["sha256"]), served.content


def test_an_upload_stores_its_metadata_in_a_row_and_no_second_blob(tmp_path: Path) -> None:
    with start_inproc_hub(tmp_path / "hub") as hub:
        token = hub.add_user("meta")
        filename = _upload(hub, token, "row-env")
        advertised, served = _advertised_and_served(hub, "meta", "row-env")
        assert hashlib.sha256(served).hexdigest() == advertised
        assert b"Name: row-env" in served
        engine = open_database(hub.settings)
        try:
            with Session(engine) as session:
                file = session.exec(select(DistFile).where(DistFile.filename == filename)).one()
                row = session.get(FileMetadata, file.id)
        finally:
            engine.dispose()
        assert row is not None and row.raw == served and file.metadata_blob_key is None
        blobs = [p for p in (tmp_path / "hub" / "blobs" / "sha256").rglob("*") if p.is_file()]
        assert [p.name for p in blobs] == [file.sha256]  # the wheel, and nothing else


def test_a_file_stored_before_hub_0005_serves_its_metadata_blob(tmp_path: Path) -> None:
    """Turn an upload into what hub_0004 stored (the metadata in a blob, no row): the index
    still advertises and serves the same bytes."""
    with start_inproc_hub(tmp_path / "hub") as hub:
        token = hub.add_user("old")
        filename = _upload(hub, token, "blob-env")
        before = _advertised_and_served(hub, "old", "blob-env")
        engine = open_database(hub.settings)
        store = BlobStore(hub.settings.resolved_storage_url)
        try:
            with Session(engine) as session:
                file = session.exec(select(DistFile).where(DistFile.filename == filename)).one()
                row = session.get(FileMetadata, file.id)
                assert row is not None and file.metadata_sha256 is not None
                key = content_key(file.metadata_sha256)
                store.put_bytes(row.raw, key)
                file.metadata_blob_key = key
                session.delete(row)
                session.commit()
        finally:
            engine.dispose()
        assert _advertised_and_served(hub, "old", "blob-env") == before


def test_a_downgrade_to_hub_0004_stops_advertising_metadata_it_cannot_serve(
    tmp_path: Path,
) -> None:
    """hub_0004's code serves `.metadata` only from a blob and advertises `metadata_sha256`
    on the index; a file uploaded since hub_0005 has no blob, so after a downgrade its hash
    must be gone (pip then downloads the wheel) instead of advertised and answered 404 (pip
    fails the install). A file that had its blob keeps its hash."""
    with start_inproc_hub(tmp_path / "hub") as hub:
        token = hub.add_user("down")
        row_file = _upload(hub, token, "row-env")
        blob_file = _upload(hub, token, "blob-env")
        settings = hub.settings
    engine = open_database(settings)
    store = BlobStore(settings.resolved_storage_url)
    try:
        with Session(engine) as session:  # blob-env as hub_0004 stored it
            file = session.exec(select(DistFile).where(DistFile.filename == blob_file)).one()
            row = session.get(FileMetadata, file.id)
            assert row is not None and file.metadata_sha256 is not None
            store.put_bytes(row.raw, content_key(file.metadata_sha256))
            file.metadata_blob_key = content_key(file.metadata_sha256)
            session.delete(row)
            session.commit()
        config = alembic_config()
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.downgrade(config, "hub_0004")
        with engine.connect() as connection:
            advertised = dict(
                connection.exec_driver_sql("SELECT filename, metadata_sha256 FROM distfile").all()
            )
        assert advertised[row_file] is None
        assert advertised[blob_file] is not None
        migrate(engine)  # and back: the wheel itself is still installable
    finally:
        engine.dispose()
    with TestClient(create_app(settings)) as http:  # a server started on the migrated data
        page = http.get("/down/simple/row-env/", headers={"Accept": _JSON}).json()
        (entry,) = page["files"]
        assert entry["core-metadata"] is False
        wheel = http.get(urljoin("/down/simple/row-env/", entry["url"]))
        assert hashlib.sha256(wheel.content).hexdigest() == entry["hashes"]["sha256"]
        page = http.get("/down/simple/blob-env/", headers={"Accept": _JSON}).json()
        (entry,) = page["files"]
        served = http.get(urljoin("/down/simple/blob-env/", entry["url"] + ".metadata"))
        assert hashlib.sha256(served.content).hexdigest() == advertised[blob_file]
        assert entry["core-metadata"]["sha256"] == advertised[blob_file]
