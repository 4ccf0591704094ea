"""The Lab's tables: `labmodel` (tenants' LoRA models) and `labcheckpoint` (their archives).

Revision ID: lab_0001
Revises: evals_0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlmodel.sql.sqltypes import AutoString

revision: str = "lab_0001"
down_revision: str | None = "evals_0004"


def upgrade() -> None:
    op.create_table(
        "labmodel",
        sa.Column("id", AutoString(length=64), nullable=False),
        sa.Column("user_id", AutoString(length=32), nullable=False),
        sa.Column("base_model", AutoString(length=256), nullable=False),
        sa.Column("rank", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["user.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("labmodel") as batch_op:
        batch_op.create_index("ix_labmodel_user_id", ["user_id"])
    op.create_table(
        "labcheckpoint",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", AutoString(length=32), nullable=False),
        sa.Column("model_id", AutoString(length=64), nullable=False),
        sa.Column("kind", AutoString(length=16), nullable=False),
        sa.Column("name", AutoString(length=128), nullable=False),
        sa.Column("sha256", AutoString(length=64), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["user.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("user_id", "model_id", "kind", "name"),
    )
    with op.batch_alter_table("labcheckpoint") as batch_op:
        batch_op.create_index("ix_labcheckpoint_user_id", ["user_id"])


def downgrade() -> None:
    op.drop_table("labcheckpoint")
    op.drop_table("labmodel")
