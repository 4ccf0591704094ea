"""A row per pushed sample (`evaluationsample`) for the samples viewer's filters and paging.

Existing runs are indexed from their batch blobs the first time they are viewed
(`hub_server.evals.sample_index.ensure_indexed`), so this migration only creates the table.

Revision ID: evals_0003
Revises: web_0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "evals_0003"
down_revision: str | None = "web_0001"


def upgrade() -> None:
    op.create_table(
        "evaluationsample",
        sa.Column("evaluation_id", sa.String(length=32), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("example_index", sa.Integer(), nullable=False),
        sa.Column("rollout_index", sa.Integer(), nullable=False),
        sa.Column("reward", sa.Float(), nullable=True),
        sa.Column("error_type", sa.String(length=128), nullable=True),
        sa.Column("stop_reason", sa.String(length=64), nullable=True),
        sa.ForeignKeyConstraint(["evaluation_id"], ["evaluation.id"]),
        sa.PrimaryKeyConstraint("evaluation_id", "seq", "position"),
    )
    op.create_index("ix_evaluationsample_reward", "evaluationsample", ["evaluation_id", "reward"])
    op.create_index(
        "ix_evaluationsample_example", "evaluationsample", ["evaluation_id", "example_index"]
    )


def downgrade() -> None:
    op.drop_index("ix_evaluationsample_example", table_name="evaluationsample")
    op.drop_index("ix_evaluationsample_reward", table_name="evaluationsample")
    op.drop_table("evaluationsample")
