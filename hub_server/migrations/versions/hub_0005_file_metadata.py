"""Each wheel's PEP 658 metadata in a `filemetadata` row instead of a blob of its own.

Writing the metadata as a second content-addressed blob cost every wheel upload a second file,
usually a new fan-out directory, and two more fsyncs; a row in the file's own transaction costs
one insert. Files stored before this revision keep `distfile.metadata_blob_key` and are still
served from that blob (the migration cannot reach the blob store, which may be S3).

Revision ID: hub_0005
Revises: hub_0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlmodel.sql.sqltypes import AutoString

revision: str = "hub_0005"
down_revision: str | None = "hub_0004"


def upgrade() -> None:
    op.create_table(
        "filemetadata",
        sa.Column("file_id", AutoString(length=32), nullable=False),
        sa.Column("raw", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(["file_id"], ["distfile.id"]),
        sa.PrimaryKeyConstraint("file_id"),
    )


def downgrade() -> None:
    # Lossy: files stored since have no metadata blob, so the older code cannot serve theirs.
    # It advertises `metadata_sha256` on the index and answers 404 for a file without a blob
    # key, and pip then fails the whole install; with the hash cleared it downloads the wheel.
    op.execute(
        "UPDATE distfile SET metadata_sha256 = NULL "
        "WHERE metadata_blob_key IS NULL AND metadata_sha256 IS NOT NULL"
    )
    op.drop_table("filemetadata")
