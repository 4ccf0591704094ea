"""Environments as the REST API shows them (listings, info) and the metadata an owner may patch."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, Field, StringConstraints

from registry_index.schemas.request import RequestBody

MAX_TAG_LENGTH = 64
"""The widest tag the hub stores (its column width): a longer one is refused with a 400."""


class Visibility(StrEnum):
    """Who may see an environment: everyone, or its owner's people (404 to anyone else)."""

    PUBLIC = "public"
    PRIVATE = "private"


class OwnerKind(StrEnum):
    """A namespace belongs to one user or to an organisation."""

    USER = "user"
    ORG = "org"


def _lower(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


# Clients (the stock one among them) send PUBLIC/PRIVATE as well.
VisibilityIn = Annotated[Visibility, BeforeValidator(_lower)]
# A tag as the database stores it: refused with a 400 when longer (never cut or a 500).
Tag = Annotated[str, StringConstraints(min_length=1, max_length=MAX_TAG_LENGTH)]
Tags = Annotated[list[Tag], Field(max_length=32)]


class OwnerOut(BaseModel):
    name: str
    kind: OwnerKind


class EnvironmentSummary(BaseModel):
    id: str
    owner: OwnerOut
    name: str
    description: str
    tags: list[str]
    visibility: Visibility
    latest_version: str | None
    created_at: datetime
    updated_at: datetime
    downloads: int


class EnvironmentDetail(EnvironmentSummary):
    versions_count: int


class EnvironmentPatch(RequestBody):
    description: str | None = None
    tags: Tags | None = None
    visibility: VisibilityIn | None = None
