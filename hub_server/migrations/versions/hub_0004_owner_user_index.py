"""An index on `owner.user_id`.

Every authenticated request resolves the caller's own owner (and the owners it may publish
to) by `owner.user_id`; without an index that was a scan of the whole owner table per request,
growing with the number of users and organisations on the hub.

Revision ID: hub_0004
Revises: hub_0003
"""

from __future__ import annotations

from alembic import op

revision: str = "hub_0004"
down_revision: str | None = "hub_0003"


def upgrade() -> None:
    op.create_index("ix_owner_user_id", "owner", ["user_id"])


def downgrade() -> None:
    op.drop_index("ix_owner_user_id", table_name="owner")
