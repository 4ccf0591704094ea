"""The hub's re-scoring of a run (`evals.verification`): its status, what it found, when it
started (a run left `running` by a crashed worker is picked up again), attempts and when it
ended.

Revision ID: evals_0004
Revises: hub_0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlmodel.sql.sqltypes import AutoString

revision: str = "evals_0004"
down_revision: str | None = "hub_0007"


def upgrade() -> None:
    with op.batch_alter_table("evaluation") as batch_op:
        batch_op.add_column(sa.Column("verification", sa.String(length=16), nullable=True))
        batch_op.add_column(
            sa.Column("verification_detail", AutoString(length=2000), nullable=True)
        )
        batch_op.add_column(sa.Column("verification_started_at", sa.DateTime(), nullable=True))
        batch_op.add_column(
            sa.Column("verification_attempts", sa.Integer(), nullable=False, server_default="0")
        )
        batch_op.add_column(sa.Column("verified_at", sa.DateTime(), nullable=True))
        batch_op.create_index("ix_evaluation_verification", ["verification"])


def downgrade() -> None:
    # A plain DROP COLUMN (SQLite >= 3.35), not batch mode: batch mode copies the table and
    # drops the old one, which the batches and samples pointing at a run refuse.
    op.drop_index("ix_evaluation_verification", table_name="evaluation")
    for column in (
        "verified_at",
        "verification_attempts",
        "verification_started_at",
        "verification_detail",
        "verification",
    ):
        op.drop_column("evaluation", column)
