"""The per-process state of a running hub, hung on `app.state.hub`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from sqlalchemy.engine import Engine

from hub_server.core.blobstore import BlobStorage
from hub_server.core.cache import PageCache
from hub_server.core.settings import HubSettings
from hub_server.http.ratelimit import SlidingWindowLimiter


class DownloadTally(Protocol):
    """Where a served file's download is counted (index.download_counts writes them in batches)."""

    def add(self, file_id: str, env_id: str) -> None: ...


@dataclass
class Hub:
    """Settings, database, blob store, rate limiters, the rendered-page cache and the
    downloads counted since the last write."""

    settings: HubSettings
    engine: Engine
    store: BlobStorage
    upload_limiter: SlidingWindowLimiter
    login_limiter: SlidingWindowLimiter
    downloads: DownloadTally
    pages: PageCache = field(default_factory=PageCache)
