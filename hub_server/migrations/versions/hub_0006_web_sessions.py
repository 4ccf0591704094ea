"""Browser sessions kept on the server (`websession`), so signing out ends a session for every
copy of its cookie; the cookie used to name the token alone, and signing out only deleted it.

Sessions signed in before this revision (cookies naming a token) are no longer recognised:
their browsers sign in again.

Revision ID: hub_0006
Revises: hub_0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlmodel.sql.sqltypes import AutoString

revision: str = "hub_0006"
down_revision: str | None = "hub_0005"


def upgrade() -> None:
    op.create_table(
        "websession",
        sa.Column("id", AutoString(length=64), nullable=False),
        sa.Column("token_id", AutoString(length=32), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("ended_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(["token_id"], ["apitoken.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("websession") as batch_op:
        batch_op.create_index("ix_websession_token_id", ["token_id"])


def downgrade() -> None:
    op.drop_table("websession")
