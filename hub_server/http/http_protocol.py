"""HTTP/1.1 server protocol that can send a custom reason phrase.

twine and `uv publish` show only the status line of a failed upload, so PyPI puts the error
message in the reason phrase ("400 File already exists ..."). ASGI has no field for it and
uvicorn always writes the standard phrase, so the app sets the private response header
`x-hub-reason` and this h11 protocol moves it into the status line.
"""

from __future__ import annotations

from typing import Any, overload

import h11
from uvicorn.protocols.http.h11_impl import DEFAULT_MAX_INCOMPLETE_EVENT_SIZE, H11Protocol

REASON_HEADER = b"x-hub-reason"


def latin1_reason(message: str, limit: int = 400) -> str:
    """A reason phrase for `message`: one line, latin-1 safe, bounded (like warehouse's)."""
    text = " ".join(message.split())[:limit]
    text = "".join("?" if ord(ch) < 32 or ord(ch) == 127 else ch for ch in text)
    return text.encode("latin-1", "replace").decode("latin-1")


class _ReasonConnection(h11.Connection):
    """An h11 connection that takes a response's reason phrase from `x-hub-reason`."""

    @overload
    def send(self, event: h11.ConnectionClosed) -> None: ...
    @overload
    def send(
        self,
        event: h11.Request | h11.InformationalResponse | h11.Response | h11.Data | h11.EndOfMessage,
    ) -> bytes: ...
    @overload
    def send(self, event: h11.Event) -> bytes | None: ...

    def send(self, event: h11.Event) -> bytes | None:
        if isinstance(event, h11.Response):
            reason = None
            kept = []
            for name, value in event.headers:
                if name.lower() == REASON_HEADER:
                    reason = value
                else:
                    kept.append((name, value))
            if reason is not None:
                event = h11.Response(
                    status_code=event.status_code,
                    headers=kept,
                    reason=reason,
                    http_version=event.http_version,
                )
        return super().send(event)


class ReasonPhraseH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with `_ReasonConnection`; pass as `uvicorn.Config(http=...)`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        limit = self.config.h11_max_incomplete_event_size
        self.conn = _ReasonConnection(h11.SERVER, limit or DEFAULT_MAX_INCOMPLETE_EVENT_SIZE)
