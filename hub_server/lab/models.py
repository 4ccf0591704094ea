"""The Lab's tables: tenants' models and their checkpoints (the archives are blobs).

A model row outlives the process that trained it, so after a restart its owner's requests
find it again (its adapter reloaded from its latest state checkpoint); a checkpoint row names
the blob holding its archive and its size, which the per-account quota sums.

No `from __future__ import annotations` in table modules: SQLModel reads the annotations.
"""

from datetime import datetime

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from hub_server.core.ids import utcnow


class LabModel(SQLModel, table=True):
    """A training client's model: a LoRA adapter on the Lab's base model, owned by a user."""

    id: str = Field(primary_key=True, max_length=64)
    user_id: str = Field(foreign_key="user.id", index=True, max_length=32)
    base_model: str = Field(max_length=256)
    rank: int
    created_at: datetime = Field(default_factory=utcnow)


class LabCheckpoint(SQLModel, table=True):
    """`tinker://MODEL/KIND/NAME` of a user: its archive's blob (by sha256) and size."""

    __table_args__ = (sa.UniqueConstraint("user_id", "model_id", "kind", "name"),)

    id: int | None = Field(default=None, primary_key=True)
    user_id: str = Field(foreign_key="user.id", index=True, max_length=32)
    model_id: str = Field(max_length=64)
    kind: str = Field(max_length=16)  # weights | sampler_weights
    name: str = Field(max_length=128)
    sha256: str = Field(max_length=64)
    size: int = Field(sa_type=sa.BigInteger)
    created_at: datetime = Field(default_factory=utcnow)
