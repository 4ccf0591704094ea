"""Errors the hub turns into 4xx responses; each message says what to do about it."""

from __future__ import annotations


class HubError(Exception):
    """A refused request: `status` and a user-facing `message`."""

    status = 400

    def __init__(self, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.headers = headers or {}


class BadRequest(HubError):
    status = 400


class Unauthorized(HubError):
    status = 401

    def __init__(self, message: str) -> None:
        super().__init__(message, {"WWW-Authenticate": 'Basic realm="prime-hub"'})


class Forbidden(HubError):
    status = 403


class NotFound(HubError):
    status = 404


class Conflict(HubError):
    status = 409


class TooLarge(HubError):
    status = 413


class OutOfSpace(HubError):
    """The hub's disk (or database) is full: nothing was stored, the client may retry later."""

    status = 507

    def __init__(self) -> None:
        super().__init__(
            "The hub is out of storage space, so nothing was stored; try again later. "
            "(Hub operator: free space where the hub keeps its data and blobs.)",
            {"Retry-After": "300"},
        )


class RateLimited(HubError):
    status = 429

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message, {"Retry-After": str(retry_after)})


class FileExists(BadRequest):
    """A filename already used with other bytes (twine keys on the 'File already exists' text)."""

    def __init__(self, filename: str, sha256: str) -> None:
        super().__init__(
            f"File already exists ('{filename}', with sha256 hash '{sha256}'). Files are "
            "immutable: bump the version number and upload again."
        )
