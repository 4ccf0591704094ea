"""Initial registry schema: users, owners, tokens, environments, versions, files, uploads.

Other hub modules chain their migrations on `hub_0001` (keep one linear history).

Revision ID: hub_0001
Revises:
Create Date: 2026-11-30 09:08:39.206753
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel.sql.sqltypes
from alembic import op

revision: str = "hub_0001"
down_revision: str | None = None


def upgrade() -> None:
    op.create_table(
        "user",
        sa.Column("id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("username", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("is_admin", sa.Boolean(), nullable=False),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("user", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_user_username"), ["username"], unique=True)

    op.create_table(
        "apitoken",
        sa.Column("id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("user_id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("name", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column("token_hash", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("scopes", sqlmodel.sql.sqltypes.AutoString(length=2048), nullable=False),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("last_used_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.Column("revoked_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["user.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("apitoken", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_apitoken_token_hash"), ["token_hash"], unique=True)
        batch_op.create_index(batch_op.f("ix_apitoken_user_id"), ["user_id"], unique=False)

    op.create_table(
        "owner",
        sa.Column("id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("name", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("kind", sqlmodel.sql.sqltypes.AutoString(length=8), nullable=False),
        sa.Column("user_id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=True),
        sa.Column("serial", sa.Integer(), nullable=False),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["user.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("owner", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_owner_name"), ["name"], unique=True)

    op.create_table(
        "environment",
        sa.Column("id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("owner_id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("name", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column("normalized_name", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column("description", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("visibility", sqlmodel.sql.sqltypes.AutoString(length=8), nullable=False),
        sa.Column("serial", sa.Integer(), nullable=False),
        sa.Column("downloads", sa.Integer(), nullable=False),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("updated_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["owner_id"],
            ["owner.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("owner_id", "normalized_name"),
    )
    with op.batch_alter_table("environment", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_environment_normalized_name"), ["normalized_name"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_environment_updated_at"), ["updated_at"], unique=False)

    op.create_table(
        "membership",
        sa.Column("owner_id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("user_id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("role", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.ForeignKeyConstraint(
            ["owner_id"],
            ["owner.id"],
        ),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["user.id"],
        ),
        sa.PrimaryKeyConstraint("owner_id", "user_id"),
    )
    with op.batch_alter_table("membership", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_membership_user_id"), ["user_id"], unique=False)

    op.create_table(
        "environmenttag",
        sa.Column("environment_id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("tag", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.ForeignKeyConstraint(
            ["environment_id"],
            ["environment.id"],
        ),
        sa.PrimaryKeyConstraint("environment_id", "tag"),
    )
    with op.batch_alter_table("environmenttag", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_environmenttag_tag"), ["tag"], unique=False)

    op.create_table(
        "pendingupload",
        sa.Column("id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("environment_id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("kind", sqlmodel.sql.sqltypes.AutoString(length=8), nullable=False),
        sa.Column("filename", sqlmodel.sql.sqltypes.AutoString(length=255), nullable=False),
        sa.Column("sha256", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("size", sa.Integer(), nullable=True),
        sa.Column("semantic_version", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("content_hash", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True),
        sa.Column("secret_hash", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("staging_key", sqlmodel.sql.sqltypes.AutoString(length=255), nullable=False),
        sa.Column("user_id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("expires_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["environment_id"],
            ["environment.id"],
        ),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["user.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "version",
        sa.Column("id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("environment_id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("version", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("canonical_version", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("content_hash", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True),
        sa.Column("summary", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("requires_python", sqlmodel.sql.sqltypes.AutoString(length=256), nullable=True),
        sa.Column("requires_dist", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("yanked", sa.Boolean(), nullable=False),
        sa.Column("yanked_reason", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["environment_id"],
            ["environment.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("environment_id", "canonical_version"),
    )
    with op.batch_alter_table("version", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_version_content_hash"), ["content_hash"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_version_environment_id"), ["environment_id"], unique=False
        )

    op.create_table(
        "distfile",
        sa.Column("id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("environment_id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("version_id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("filename", sqlmodel.sql.sqltypes.AutoString(length=255), nullable=False),
        sa.Column("kind", sqlmodel.sql.sqltypes.AutoString(length=8), nullable=False),
        sa.Column("sha256", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("blob_key", sqlmodel.sql.sqltypes.AutoString(length=255), nullable=False),
        sa.Column("metadata_sha256", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True),
        sa.Column("metadata_blob_key", sqlmodel.sql.sqltypes.AutoString(length=255), nullable=True),
        sa.Column("requires_python", sqlmodel.sql.sqltypes.AutoString(length=256), nullable=True),
        sa.Column("uploaded_by", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=True),
        sa.Column("uploaded_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("downloads", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["environment_id"],
            ["environment.id"],
        ),
        sa.ForeignKeyConstraint(
            ["uploaded_by"],
            ["user.id"],
        ),
        sa.ForeignKeyConstraint(
            ["version_id"],
            ["version.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("environment_id", "filename"),
    )
    with op.batch_alter_table("distfile", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_distfile_sha256"), ["sha256"], unique=False)
        batch_op.create_index(batch_op.f("ix_distfile_version_id"), ["version_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("distfile", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_distfile_version_id"))
        batch_op.drop_index(batch_op.f("ix_distfile_sha256"))

    op.drop_table("distfile")
    with op.batch_alter_table("version", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_version_environment_id"))
        batch_op.drop_index(batch_op.f("ix_version_content_hash"))

    op.drop_table("version")
    op.drop_table("pendingupload")
    with op.batch_alter_table("environmenttag", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_environmenttag_tag"))

    op.drop_table("environmenttag")
    with op.batch_alter_table("membership", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_membership_user_id"))

    op.drop_table("membership")
    with op.batch_alter_table("environment", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_environment_updated_at"))
        batch_op.drop_index(batch_op.f("ix_environment_normalized_name"))

    op.drop_table("environment")
    with op.batch_alter_table("owner", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_owner_name"))

    op.drop_table("owner")
    with op.batch_alter_table("apitoken", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_apitoken_user_id"))
        batch_op.drop_index(batch_op.f("ix_apitoken_token_hash"))

    op.drop_table("apitoken")
    with op.batch_alter_table("user", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_user_username"))

    op.drop_table("user")
