"""The per-process state of a running hub, hung on `app.state.hub`."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy.engine import Engine

from hub_server.blobstore import BlobStore
from hub_server.page_cache import PageCache
from hub_server.ratelimit import SlidingWindowLimiter
from hub_server.settings import HubSettings


@dataclass
class Hub:
    """Settings, database, blob store, rate limiters and the rendered-page cache."""

    settings: HubSettings
    engine: Engine
    store: BlobStore
    upload_limiter: SlidingWindowLimiter
    login_limiter: SlidingWindowLimiter
    pages: PageCache = field(default_factory=PageCache)
