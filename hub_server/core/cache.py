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
from typing import Generic, TypeVar

V = TypeVar("V")


class LruCache(Generic[V]):
    """A small thread-safe LRU; keys carry the version of what they cache, so entries are
    never invalidated, only replaced by newer keys and aged out."""

    def __init__(self, capacity: int = 4096) -> None:
        self.capacity = capacity
        self._items: OrderedDict[Hashable, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: Hashable, value: V) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)


class PageCache(LruCache[bytes]):
    """Rendered simple-index pages (bytes)."""
