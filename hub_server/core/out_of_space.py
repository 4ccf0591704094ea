"""Recognising a full disk wherever a request meets it: a blob or scratch write (ENOSPC, or
EDQUOT past a quota) or the database refusing a write (SQLite's SQLITE_FULL, PostgreSQL's
disk_full). The app answers those with `errors.OutOfSpace` (507) instead of a bare 500; the
write order (blob first, row second, one transaction) already leaves nothing half-written.
"""

from __future__ import annotations

import errno

from sqlalchemy.exc import DBAPIError

from hub_server.core.errors import OutOfSpace

_FULL = (errno.ENOSPC, errno.EDQUOT)
_POSTGRES_DISK_FULL = "53100"


def out_of_space(error: BaseException) -> OutOfSpace | None:
    """The 507 to answer when `error` (or what caused it) is a full disk; None otherwise."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in _FULL:
            return OutOfSpace()
        if isinstance(current, DBAPIError) and _database_full(current.orig):
            return OutOfSpace()
        current = current.__cause__ or current.__context__
    return None


def _database_full(orig: BaseException | None) -> bool:
    if orig is None:
        return False
    if getattr(orig, "sqlite_errorname", None) == "SQLITE_FULL":
        return True
    return getattr(orig, "sqlstate", None) == _POSTGRES_DISK_FULL
