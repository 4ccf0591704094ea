"""An index on each environment's confusable name form, per owner.

A new environment name is refused when it is confusable with one already in the namespace
(`registry_index.names.ultranormalize`). `hub_server.registry.publishing` asks the database
for such a neighbour with exactly this expression, so the check is one index probe instead of
a scan of every name the owner has (75% of an upload's time at 10,000 projects).

Revision ID: hub_0003
Revises: evals_0003
"""

from __future__ import annotations

from alembic import op

revision: str = "hub_0003"
down_revision: str | None = "evals_0003"

# Frozen copy of the expression publishing builds from `ULTRA_REPLACEMENTS` (a test checks
# that SQLite's query plan uses this index for the lookup).
_CONFUSABLE = (
    "replace(replace(replace(replace(replace(replace(lower(name), "
    "'.', ''), '_', ''), '-', ''), 'l', '1'), 'i', '1'), 'o', '0')"
)


def upgrade() -> None:
    op.execute(f"CREATE INDEX ix_environment_confusable ON environment (owner_id, {_CONFUSABLE})")


def downgrade() -> None:
    op.execute("DROP INDEX ix_environment_confusable")
