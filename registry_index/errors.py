"""Errors raised by registry logic, one per kind of bad input, each a `ValueError`.

`InvalidUpload` carries a complete sentence (what is wrong and how to fix it) because the hub
puts it verbatim into the HTTP 400 reason phrase and body, which is all twine and uv show.
"""

from __future__ import annotations


class InvalidUpload(ValueError):
    """A distribution or upload request that the index refuses; the message is user-facing."""


class InvalidEnvRef(ValueError):
    """An environment reference that is not `[owner/]name[@version-or-specifier]`; the message
    says how to write it."""
