"""Shared test configuration. Fixtures that belong to one layer live in that layer's conftest."""

from __future__ import annotations

import os

from prime_env.clients.local_models import CACHE_ENV, cache_root

# Many tests give the CLI a throwaway HOME; the converted local model (a 0.5 GB cache that
# saves 20 s per load) should still be shared, as it is on a user's machine. Pinned here,
# before any test changes HOME, and inherited by every subprocess the tests start.
os.environ.setdefault(CACHE_ENV, str(cache_root()))
