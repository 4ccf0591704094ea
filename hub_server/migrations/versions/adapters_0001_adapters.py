"""LoRA adapters on the hub: `adapter`, `adapterversion` and `adapterfile` (the bytes are blobs).

Revision ID: adapters_0001
Revises: lab_0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlmodel.sql.sqltypes import AutoString

revision: str = "adapters_0001"
down_revision: str | None = "lab_0001"


def upgrade() -> None:
    op.create_table(
        "adapter",
        sa.Column("id", AutoString(length=32), nullable=False),
        sa.Column("owner_id", AutoString(length=32), nullable=False),
        sa.Column("name", AutoString(length=128), nullable=False),
        sa.Column("normalized_name", AutoString(length=128), nullable=False),
        sa.Column("description", AutoString(), nullable=False),
        sa.Column("visibility", sa.String(length=8), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["owner_id"], ["owner.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("owner_id", "normalized_name"),
    )
    with op.batch_alter_table("adapter") as batch_op:
        batch_op.create_index("ix_adapter_owner_id", ["owner_id"])
    op.create_table(
        "adapterversion",
        sa.Column("id", AutoString(length=32), nullable=False),
        sa.Column("adapter_id", AutoString(length=32), nullable=False),
        sa.Column("version", AutoString(length=64), nullable=False),
        sa.Column("canonical_version", AutoString(length=64), nullable=False),
        sa.Column("base_model", AutoString(length=256), nullable=True),
        sa.Column("rank", sa.Integer(), nullable=False),
        sa.Column("lora_alpha", sa.Float(), nullable=True),
        sa.Column("target_modules", AutoString(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("uploaded_by", AutoString(length=32), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["adapter_id"], ["adapter.id"]),
        sa.ForeignKeyConstraint(["uploaded_by"], ["user.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("adapter_id", "canonical_version"),
    )
    with op.batch_alter_table("adapterversion") as batch_op:
        batch_op.create_index("ix_adapterversion_adapter_id", ["adapter_id"])
    op.create_table(
        "adapterfile",
        sa.Column("version_id", AutoString(length=32), nullable=False),
        sa.Column("filename", AutoString(length=64), nullable=False),
        sa.Column("sha256", AutoString(length=64), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("blob_key", AutoString(length=255), nullable=False),
        sa.ForeignKeyConstraint(["version_id"], ["adapterversion.id"]),
        sa.PrimaryKeyConstraint("version_id", "filename"),
    )


def downgrade() -> None:
    op.drop_table("adapterfile")
    op.drop_table("adapterversion")
    op.drop_table("adapter")
