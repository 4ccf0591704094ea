"""Row ids and timestamps shared by every table of the hub."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime


def new_id() -> str:
    """Opaque, unguessable 32-hex row id (also used in URLs such as `{env_id}`)."""
    return uuid.uuid4().hex


def utcnow() -> datetime:
    """Aware UTC now; every timestamp column is stored and returned in UTC."""
    return datetime.now(UTC)
