"""Rendered simple-index pages, keyed by the serial of what they show.

pip and uv fetch a project page per requirement on every install, so rendering it once per
change pays off. Keys include the environment's (or owner's) `serial`, which every upload,
yank and visibility change bumps in the database; a stale page is therefore never served,
even with several server processes, and old entries simply age out of the LRU.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable


class PageCache:
    """A small thread-safe LRU of rendered pages (bytes)."""

    def __init__(self, capacity: int = 4096) -> None:
        self.capacity = capacity
        self._pages: OrderedDict[Hashable, bytes] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> bytes | None:
        with self._lock:
            page = self._pages.get(key)
            if page is not None:
                self._pages.move_to_end(key)
            return page

    def put(self, key: Hashable, page: bytes) -> None:
        with self._lock:
            self._pages[key] = page
            self._pages.move_to_end(key)
            while len(self._pages) > self.capacity:
                self._pages.popitem(last=False)
