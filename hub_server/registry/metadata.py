"""Reading a wheel's PEP 658 metadata (`<file>.metadata`) back, wherever it was stored.

Since migration hub_0005 it is a `FileMetadata` row written in the file's own transaction;
files stored before then keep it in a blob (`DistFile.metadata_blob_key`). This is the one
place that knows both, so the index and the web pages read it alike.
"""

from __future__ import annotations

from sqlmodel import Session

from hub_server.core.blobstore import BlobStorage
from hub_server.registry.models import DistFile, FileMetadata


def file_metadata(session: Session, store: BlobStorage, file: DistFile) -> bytes | None:
    """The METADATA bytes of `file` (hashing to `file.metadata_sha256`), or None if it has none."""
    if file.metadata_sha256 is None:
        return None
    row = session.get(FileMetadata, file.id)
    if row is not None:
        return row.raw
    if file.metadata_blob_key is None:
        return None
    with store.open(file.metadata_blob_key) as handle:
        return handle.read()
