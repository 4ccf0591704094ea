"""The uv binary: the one shipped in the `uv` wheel beside this Python, else one on PATH.

Installs use it (hub_client, engines), and so do environment workers, whose PATH gets its
directory: verifiers runs its harness programs as PEP 723 scripts with `uv`.
"""

from __future__ import annotations

import shutil


def find_uv() -> str | None:
    """The uv binary: the one shipped in the `uv` wheel next to us, else one on PATH."""
    try:
        import uv

        return str(uv.find_uv_bin())
    except (ImportError, FileNotFoundError):
        return shutil.which("uv")
