"""Reserved REST uploads (reserved, maybe PUT, never finalized): expiry and per-user quotas.

A reservation and its staged bytes are only useful until `expires_at`; a client that gave up
leaves both behind, so every worker sweeps expired ones continuously (core.upkeep) as well as
at start-up. While they last they count against their user's quotas, so no one can fill the
disk with reservations that are never finalized.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from hub_server.core.blobstore import BlobStorage
from hub_server.core.errors import RateLimited
from hub_server.core.ids import utcnow
from hub_server.core.settings import HubSettings
from hub_server.registry.models import PendingUpload


def purge_expired(engine: Engine, store: BlobStorage) -> int:
    """Delete expired reservations and their staged bytes; returns how many were dropped.

    Safe to run in several workers at once: the rows go in one statement, and a staged file
    already removed by another worker is not an error.
    """
    with Session(engine) as session:
        expired = session.exec(
            select(PendingUpload.id, PendingUpload.staging_key).where(
                col(PendingUpload.expires_at) < utcnow()
            )
        ).all()
        if not expired:
            return 0
        for _id, key in expired:
            store.delete(key)
        session.execute(
            sa.delete(PendingUpload).where(col(PendingUpload.id).in_([row[0] for row in expired]))
        )
        session.commit()
        return len(expired)


def check_quota(session: Session, settings: HubSettings, user_id: str, size: int | None) -> None:
    """429 when one more reservation of `size` bytes would pass the user's quotas.

    A reservation without an announced size may receive up to `max_upload_bytes`, so it
    counts as that much.
    """
    now = utcnow()
    rows = session.exec(
        select(PendingUpload.size, PendingUpload.expires_at).where(
            PendingUpload.user_id == user_id, col(PendingUpload.expires_at) >= now
        )
    ).all()
    staged = sum(settings.max_upload_bytes if s is None else s for s, _ in rows)
    wanted = settings.max_upload_bytes if size is None else size
    problem = None
    if len(rows) >= settings.max_pending_uploads_per_user:
        problem = (
            f"You have {len(rows)} unfinished uploads, the most this hub allows per user "
            f"({settings.max_pending_uploads_per_user})"
        )
    elif staged + wanted > settings.max_staged_bytes_per_user:
        problem = (
            f"Your unfinished uploads already reserve {staged} bytes; this one would pass the "
            f"{settings.max_staged_bytes_per_user} byte quota per user"
        )
    if problem is not None:
        wait = _seconds_until(min(expires for _, expires in rows), now) if rows else 1
        raise RateLimited(
            f"{problem}. Finalize or abandon them (they expire after "
            f"{settings.upload_url_ttl_seconds} s), then push again.",
            wait,
        )


def _seconds_until(moment: datetime, now: datetime) -> int:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=now.tzinfo)
    return max(1, int((moment - now).total_seconds()) + 1)
