"""LoRA adapters on the hub (`/api/v1/adapters/…`): summaries, immutable versions and their
files, the metadata an owner may patch, and a Lab checkpoint to publish."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from registry_index.schemas.environments import OwnerOut, Visibility, VisibilityIn
from registry_index.schemas.request import RequestBody

MAX_BASE_MODEL_LENGTH = 256
"""The widest base-model name the hub stores (its column width)."""


class AdapterFile(BaseModel):
    filename: str
    sha256: str
    size: int
    url: str


class AdapterVersionInfo(BaseModel):
    """One immutable version: its PEFT files and what their `adapter_config.json` says."""

    owner: str
    name: str
    version: str
    base_model: str | None
    rank: int
    lora_alpha: float | None
    target_modules: list[str]
    size: int
    files: list[AdapterFile]
    uploaded_by: str | None
    created_at: datetime


class AdapterSummary(BaseModel):
    id: str
    owner: OwnerOut
    name: str
    description: str
    visibility: Visibility
    latest_version: str | None
    base_model: str | None  # the latest version's
    created_at: datetime
    updated_at: datetime


class AdapterPatch(RequestBody):
    description: str | None = Field(default=None, max_length=2000)
    visibility: VisibilityIn | None = None


class PublishOptions(RequestBody):
    """How a push names its version: `version` (PEP 440; the next whole number when absent),
    the base model (else the config's `base_model_name_or_path`), and the visibility of an
    adapter the push creates (private when absent; an existing one keeps its own)."""

    version: str | None = Field(default=None, max_length=64)
    base_model: str | None = Field(default=None, min_length=1, max_length=MAX_BASE_MODEL_LENGTH)
    visibility: VisibilityIn | None = None


class LabPublish(PublishOptions):
    """`POST …/versions/from-lab`: one of the caller's own Lab checkpoints."""

    checkpoint: str = Field(max_length=512)  # tinker://MODEL/KIND/NAME
