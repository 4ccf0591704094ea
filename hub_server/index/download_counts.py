"""Download counts, added up in memory and written in one transaction per interval.

Counting a download used to open a second database connection while the request still held
its first; ~32 concurrent downloads then took every connection of the pool and waited for a
second one none would give back (28 of 64 got a 500 after 31 s: issue 26). A download now
takes no connection to be counted: `add` is a dictionary update, and the upkeep loop writes
the counts of every file and environment in one short transaction (`flush`, also run at
shutdown). A worker killed with SIGKILL loses at most one interval of counts; counts are
statistics, never a decision.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from hub_server.core.rows import table_of
from hub_server.registry.models import DistFile, Environment

log = logging.getLogger(__name__)

_FILES = table_of(DistFile)
_ENVS = table_of(Environment)
_ADD_TO_FILE = (
    sa.update(_FILES)
    .where(_FILES.c.id == sa.bindparam("b_id"))
    .values(downloads=_FILES.c.downloads + sa.bindparam("b_n"))
)
_ADD_TO_ENV = (
    sa.update(_ENVS)
    .where(_ENVS.c.id == sa.bindparam("b_id"))
    .values(downloads=_ENVS.c.downloads + sa.bindparam("b_n"))
)


class DownloadCounter:
    """Downloads not yet written, per file and per environment (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._files: Counter[str] = Counter()
        self._envs: Counter[str] = Counter()

    def add(self, file_id: str, env_id: str) -> None:
        """One more download of the file and of its environment (no database access)."""
        with self._lock:
            self._files[file_id] += 1
            self._envs[env_id] += 1

    def pending(self) -> int:
        """Downloads counted and not written yet."""
        with self._lock:
            return sum(self._files.values())

    def flush(self, engine: Engine) -> int:
        """Write the counts so far in one transaction; returns how many downloads it wrote.
        Counts whose write failed are kept for the next flush."""
        with self._lock:
            files, envs = self._files, self._envs
            self._files, self._envs = Counter(), Counter()
        if not files:
            return 0
        try:
            with engine.begin() as connection:
                connection.execute(_ADD_TO_FILE, [{"b_id": k, "b_n": n} for k, n in files.items()])
                connection.execute(_ADD_TO_ENV, [{"b_id": k, "b_n": n} for k, n in envs.items()])
        except Exception:
            with self._lock:
                self._files.update(files)
                self._envs.update(envs)
            raise
        return sum(files.values())
