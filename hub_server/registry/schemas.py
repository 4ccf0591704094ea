"""Request and response bodies of the REST API (see docs/api.md); FastAPI documents them."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, Field, StringConstraints, field_validator, model_validator

from hub_server.registry.models import MAX_TAG_LENGTH

T = TypeVar("T")
# A tag as the database stores it: refused with a 400 when longer (never cut or a 500).
Tag = Annotated[str, StringConstraints(min_length=1, max_length=MAX_TAG_LENGTH)]
Tags = Annotated[list[Tag], Field(max_length=32)]


class Envelope(BaseModel, Generic[T]):
    """Every success body is `{"data": ...}`, like the public Prime hub."""

    data: T


class Page(BaseModel, Generic[T]):
    data: list[T]
    total_count: int
    page: int
    per_page: int


class OwnerOut(BaseModel):
    name: str
    kind: Literal["user", "org"]


class EnvironmentSummary(BaseModel):
    id: str
    owner: OwnerOut
    name: str
    description: str
    tags: list[str]
    visibility: Literal["public", "private"]
    latest_version: str | None
    created_at: datetime
    updated_at: datetime
    downloads: int


class EnvironmentDetail(EnvironmentSummary):
    versions_count: int


class FileOut(BaseModel):
    filename: str
    kind: Literal["wheel", "sdist", "source"]
    sha256: str
    size: int
    url: str
    uploaded_at: datetime
    downloads: int


class VersionInfo(BaseModel):
    id: str
    semantic_version: str
    content_hash: str | None
    yanked: bool
    yanked_reason: str | None
    requires_python: str | None
    created_at: datetime
    downloads: int
    files: list[FileOut]


class InstallRecord(BaseModel):
    """What `prime env install` needs to install one version."""

    id: str
    owner: str
    name: str
    package_name: str
    semantic_version: str
    version_id: str
    content_hash: str | None
    visibility: Literal["public", "private"]
    yanked: bool
    yanked_reason: str | None
    requires_python: str | None
    requires_dist: list[str]
    simple_index_url: str
    install_index_url: str
    wheel_url: str | None
    wheel_sha256: str | None
    wheel_filename: str | None
    source_url: str | None
    package_url: str | None  # the stock `prime env pull` / private install reads this name
    url_dependencies: list[str]
    created_at: datetime


Visibility = Literal["public", "private"]


def _lower_visibility(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


class ResolveRequest(BaseModel):
    name: str = Field(min_length=1, max_length=128)
    visibility: Visibility | None = None
    owner_slug: str | None = None
    team_slug: str | None = None
    team_id: str | None = None
    description: str | None = None
    tags: Tags | None = None

    _visibility = field_validator("visibility", mode="before")(_lower_visibility)


class ResolveResponse(BaseModel):
    id: str
    owner: OwnerOut
    name: str
    visibility: Visibility
    created: bool


class PushMetadata(BaseModel):
    """Free-form package facts the client sends along; description and tags are kept."""

    model_config = {"extra": "allow"}

    description: str | None = None
    tags: Tags | None = None
    license: str | None = None
    dependencies: list[str] | None = None
    python_requires: str | None = None
    original_filename: str | None = None
    requires_dist: list[str] | None = None
    # [low, high]: the hub refuses eval samples whose reward falls outside (integrity).
    reward_range: tuple[float, float] | None = None

    @model_validator(mode="after")
    def _ordered_range(self) -> PushMetadata:
        if self.reward_range is not None:
            low, high = self.reward_range
            if not (abs(low) < float("inf") and abs(high) < float("inf") and low <= high):
                raise ValueError("reward_range must be two finite numbers [low, high], low <= high")
        return self


class UploadRequest(BaseModel):
    content_hash: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    filename: str = Field(min_length=1, max_length=255)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    size: int | None = Field(default=None, ge=0)
    semantic_version: str = Field(min_length=1, max_length=64)
    metadata: PushMetadata = Field(default_factory=PushMetadata)


class WheelReservation(BaseModel):
    wheel_id: str
    upload_url: str
    expires_at: datetime


class SourceReservation(BaseModel):
    version_id: str
    upload_url: str
    expires_at: datetime


class PutResult(BaseModel):
    sha256: str
    size: int


class FinalizeResult(BaseModel):
    success: bool
    version: VersionInfo


class EnvironmentPatch(BaseModel):
    description: str | None = None
    tags: Tags | None = None
    visibility: Visibility | None = None

    _visibility = field_validator("visibility", mode="before")(_lower_visibility)


class YankRequest(BaseModel):
    reason: str | None = Field(default=None, max_length=1000)


class TokenOut(BaseModel):
    name: str
    scopes: list[str]


class WhoAmI(BaseModel):
    id: str
    username: str
    is_admin: bool
    organizations: list[str]
    token: TokenOut
