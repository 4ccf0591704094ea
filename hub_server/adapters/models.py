"""Adapter tables: an adapter `owner/name`, its immutable versions, and their files (the bytes
are content-addressed blobs of the hub's store, never rows).

No `from __future__ import annotations` in table modules: SQLModel reads the annotations.
"""

from datetime import datetime

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from hub_server.core.columns import EnumText
from hub_server.core.ids import new_id, utcnow
from registry_index.schemas.adapters import MAX_BASE_MODEL_LENGTH
from registry_index.schemas.environments import Visibility


class Adapter(SQLModel, table=True):
    """A LoRA adapter `owner/name` (a namespace of its own beside the owner's environments)."""

    __table_args__ = (sa.UniqueConstraint("owner_id", "normalized_name"),)

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    owner_id: str = Field(foreign_key="owner.id", max_length=32, index=True)
    name: str = Field(max_length=128)
    normalized_name: str = Field(max_length=128)
    description: str = ""
    visibility: Visibility = Field(default=Visibility.PRIVATE, sa_type=EnumText(Visibility, 8))
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class AdapterVersion(SQLModel, table=True):
    """One immutable version: what its adapter_config.json says, and who pushed it."""

    __table_args__ = (sa.UniqueConstraint("adapter_id", "canonical_version"),)

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    adapter_id: str = Field(foreign_key="adapter.id", index=True, max_length=32)
    version: str = Field(max_length=64)
    canonical_version: str = Field(max_length=64)
    base_model: str | None = Field(default=None, max_length=MAX_BASE_MODEL_LENGTH)
    rank: int
    lora_alpha: float | None = None
    target_modules: str = "[]"  # JSON list
    size: int = Field(sa_type=sa.BigInteger)  # its files' bytes (the owner's quota sums them)
    uploaded_by: str | None = Field(default=None, foreign_key="user.id", max_length=32)
    created_at: datetime = Field(default_factory=utcnow)


class AdapterFile(SQLModel, table=True):
    """One file of a version (adapter_config.json, adapter_model.safetensors): its blob."""

    version_id: str = Field(foreign_key="adapterversion.id", primary_key=True, max_length=32)
    filename: str = Field(primary_key=True, max_length=64)
    sha256: str = Field(max_length=64)
    size: int = Field(sa_type=sa.BigInteger)
    blob_key: str = Field(max_length=255)
