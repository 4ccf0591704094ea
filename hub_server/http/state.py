"""The per-process state of a running hub, hung on `app.state.hub`."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy.engine import Engine

from hub_server.core.blobstore import BlobStorage
from hub_server.core.cache import PageCache
from hub_server.core.settings import HubSettings
from hub_server.http.ratelimit import SlidingWindowLimiter
from hub_server.index.download_counts import DownloadCounter


@dataclass
class Hub:
    """Settings, database, blob store, rate limiters, the rendered-page cache and the
    downloads counted since the last write."""

    settings: HubSettings
    engine: Engine
    store: BlobStorage
    upload_limiter: SlidingWindowLimiter
    login_limiter: SlidingWindowLimiter
    pages: PageCache = field(default_factory=PageCache)
    downloads: DownloadCounter = field(default_factory=DownloadCounter)
