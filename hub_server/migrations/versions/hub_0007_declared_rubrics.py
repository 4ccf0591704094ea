"""A version's declared rubric (`version.rubric_json`), and the push reservation that carries
it until the version is published (`pendingupload.rubric_json`).

Revision ID: hub_0007
Revises: hub_0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlmodel.sql.sqltypes import AutoString

revision: str = "hub_0007"
down_revision: str | None = "hub_0006"


def upgrade() -> None:
    for table in ("version", "pendingupload"):
        with op.batch_alter_table(table) as batch_op:
            batch_op.add_column(sa.Column("rubric_json", AutoString(), nullable=True))


def downgrade() -> None:
    # A plain DROP COLUMN (SQLite >= 3.35), not batch mode: batch mode copies the table and
    # drops the old one, which the files and runs pointing at a version refuse.
    for table in ("version", "pendingupload"):
        op.drop_column(table, "rubric_json")
