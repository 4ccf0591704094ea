"""Per-batch partial sums (`evaluationbatch.partial_json`) so finalize does not re-read blobs.

Revision ID: evals_0002
Revises: evals_0001
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel.sql.sqltypes
from alembic import op

revision: str = "evals_0002"
down_revision: str | None = "evals_0001"


def upgrade() -> None:
    with op.batch_alter_table("evaluationbatch", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("partial_json", sqlmodel.sql.sqltypes.AutoString(), nullable=True)
        )


def downgrade() -> None:
    with op.batch_alter_table("evaluationbatch", schema=None) as batch_op:
        batch_op.drop_column("partial_json")
