"""Where the CLI and the SDK keep per-user caches: `$XDG_CACHE_HOME/prime` (else ~/.cache/prime).

One home for the rule, so verified wheels (`prime env install`) and converted local models
(`local/<name>`) end up side by side and one `XDG_CACHE_HOME` moves both.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_home() -> Path:
    """The per-user cache directory of everything `prime`."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "prime"
