"""The `prime env push` flow: resolve (get or create) → reserve an upload → PUT → finalize."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field, model_validator

from registry_index.bounds import MAX_STORED_INT
from registry_index.rubric_spec import RubricSpec
from registry_index.schemas.environments import OwnerOut, Tags, Visibility, VisibilityIn
from registry_index.schemas.request import RequestBody
from registry_index.schemas.versions import VersionInfo

SHA256_HEX = r"^[0-9a-f]{64}$"


class ResolveRequest(RequestBody):
    name: str = Field(min_length=1, max_length=128)
    visibility: VisibilityIn | None = None
    owner_slug: str | None = None
    team_slug: str | None = None
    team_id: str | None = None
    description: str | None = None
    tags: Tags | None = None


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
    # pyproject's [tool.prime.rubric]: each function's weight and range; kept with the version,
    # and every sample of a run of it must be what that rubric can produce.
    rubric: RubricSpec | None = None

    @model_validator(mode="after")
    def _ordered_range(self) -> PushMetadata:
        if self.reward_range is not None:
            low, high = self.reward_range
            if not (abs(low) < float("inf") and abs(high) < float("inf") and low <= high):
                raise ValueError("reward_range must be two finite numbers [low, high], low <= high")
        return self


class UploadRequest(RequestBody):
    content_hash: str | None = Field(default=None, pattern=SHA256_HEX)
    filename: str = Field(min_length=1, max_length=255)
    sha256: str = Field(pattern=SHA256_HEX)
    size: int | None = Field(default=None, ge=0, le=MAX_STORED_INT)
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
