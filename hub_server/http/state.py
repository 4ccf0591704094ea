"""The per-process state of a running hub, hung on `app.state.hub`."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy.engine import Engine

from hub_server.core.blobstore import BlobStorage
from hub_server.core.cache import PageCache
from hub_server.core.settings import HubSettings
from hub_server.http.ratelimit import SlidingWindowLimiter


@dataclass
class Hub:
    """Settings, database, blob store, rate limiters and the rendered-page cache."""

    settings: HubSettings
    engine: Engine
    store: BlobStorage
    upload_limiter: SlidingWindowLimiter
    login_limiter: SlidingWindowLimiter
    pages: PageCache = field(default_factory=PageCache)
