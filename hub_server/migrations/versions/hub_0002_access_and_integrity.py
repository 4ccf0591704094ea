"""Hardening (issue 9): disabled/deleted users, one PUT per upload URL, declared reward ranges,
idempotent eval runs and batches (`client_run_id`, `request_sha256`) and runs hidden by the environment's owner.

Revision ID: hub_0002
Revises: evals_0002
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel.sql.sqltypes
from alembic import op

revision: str = "hub_0002"
down_revision: str | None = "evals_0002"


def upgrade() -> None:
    with op.batch_alter_table("user", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("disabled_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True)
        )
        batch_op.add_column(
            sa.Column("deleted_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True)
        )
    with op.batch_alter_table("pendingupload", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("receiving_since", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True)
        )
        batch_op.create_index("ix_pendingupload_user_id", ["user_id"], unique=False)
    with op.batch_alter_table("environment", schema=None) as batch_op:
        batch_op.add_column(sa.Column("reward_min", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("reward_max", sa.Float(), nullable=True))
    with op.batch_alter_table("evaluation", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("client_run_id", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=True)
        )
        batch_op.add_column(
            sa.Column("hidden_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True)
        )
        batch_op.create_unique_constraint(
            "uq_evaluation_user_id_client_run_id", ["user_id", "client_run_id"]
        )
    with op.batch_alter_table("evaluationbatch", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("request_sha256", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True)
        )


def downgrade() -> None:
    with op.batch_alter_table("evaluationbatch", schema=None) as batch_op:
        batch_op.drop_column("request_sha256")
    with op.batch_alter_table("evaluation", schema=None) as batch_op:
        batch_op.drop_constraint("uq_evaluation_user_id_client_run_id", type_="unique")
        batch_op.drop_column("hidden_at")
        batch_op.drop_column("client_run_id")
    with op.batch_alter_table("environment", schema=None) as batch_op:
        batch_op.drop_column("reward_max")
        batch_op.drop_column("reward_min")
    with op.batch_alter_table("pendingupload", schema=None) as batch_op:
        batch_op.drop_index("ix_pendingupload_user_id")
        batch_op.drop_column("receiving_since")
    with op.batch_alter_table("user", schema=None) as batch_op:
        batch_op.drop_column("deleted_at")
        batch_op.drop_column("disabled_at")
