"""The two shapes every success body of the REST API takes, like the public Prime hub."""

from __future__ import annotations

from typing import Generic, TypeVar

from pydantic import BaseModel

T = TypeVar("T")


class Envelope(BaseModel, Generic[T]):
    """Every success body is `{"data": ...}`, like the public Prime hub."""

    data: T


class Page(BaseModel, Generic[T]):
    """One page of a listing: the items, how many there are in all, and where this page is."""

    data: list[T]
    total_count: int
    page: int
    per_page: int
