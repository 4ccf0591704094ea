"""The one shape of every error the hub answers (4xx and 5xx): `{"detail": "<one sentence>"}`."""

from __future__ import annotations

from pydantic import BaseModel


class ErrorBody(BaseModel):
    """What went wrong and how to fix it, as one readable sentence (never a list of loc/msg)."""

    detail: str
