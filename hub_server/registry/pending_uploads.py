"""Expiry of abandoned REST uploads (reserved, maybe PUT, never finalized).

A reservation and its staged bytes are only useful until `expires_at`; a client that gave up
leaves both behind, so the server drops expired ones when it starts.
"""

from __future__ import annotations

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from hub_server.core.blobstore import BlobStore
from hub_server.core.ids import utcnow
from hub_server.registry.models import PendingUpload


def purge_expired(engine: Engine, store: BlobStore) -> int:
    """Delete expired reservations and their staged bytes; returns how many were dropped."""
    with Session(engine) as session:
        expired = session.exec(
            select(PendingUpload).where(col(PendingUpload.expires_at) < utcnow())
        ).all()
        for pending in expired:
            store.delete(pending.staging_key)
            session.delete(pending)
        session.commit()
        return len(expired)
