"""Full-text search over environment names and descriptions.

SQLite: an FTS5 table `environment_fts` with external content (the `environment` table, by
rowid), kept in step by triggers on insert, update of name/description, and delete. A later
migration that recreates `environment` (Alembic batch mode on SQLite) drops these triggers and
must create them again (`_create_sqlite_triggers`) and rebuild the index.
PostgreSQL: an expression GIN index on `to_tsvector('simple', name || ' ' || description)`,
the exact expression `hub_server.search.service` queries, so no table or trigger is needed.

Revision ID: web_0001
Revises: hub_0002
"""

from __future__ import annotations

from alembic import op

revision: str = "web_0001"
down_revision: str | None = "hub_0002"

_SQLITE_TRIGGERS = (
    """CREATE TRIGGER environment_fts_insert AFTER INSERT ON environment BEGIN
         INSERT INTO environment_fts(rowid, name, description)
         VALUES (new.rowid, new.name, new.description);
       END""",
    """CREATE TRIGGER environment_fts_delete AFTER DELETE ON environment BEGIN
         INSERT INTO environment_fts(environment_fts, rowid, name, description)
         VALUES ('delete', old.rowid, old.name, old.description);
       END""",
    """CREATE TRIGGER environment_fts_update AFTER UPDATE OF name, description ON environment
       BEGIN
         INSERT INTO environment_fts(environment_fts, rowid, name, description)
         VALUES ('delete', old.rowid, old.name, old.description);
         INSERT INTO environment_fts(rowid, name, description)
         VALUES (new.rowid, new.name, new.description);
       END""",
)


def _create_sqlite_triggers() -> None:
    for statement in _SQLITE_TRIGGERS:
        op.execute(statement)


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        op.execute(
            "CREATE VIRTUAL TABLE environment_fts USING fts5("
            "name, description, content='environment', content_rowid='rowid', "
            "tokenize='unicode61')"
        )
        _create_sqlite_triggers()
        op.execute("INSERT INTO environment_fts(environment_fts) VALUES ('rebuild')")
    elif dialect == "postgresql":
        op.execute(
            "CREATE INDEX environment_fts_idx ON environment USING gin "
            "(to_tsvector('simple', coalesce(name, '') || ' ' || coalesce(description, '')))"
        )


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for name in ("insert", "delete", "update"):
            op.execute(f"DROP TRIGGER IF EXISTS environment_fts_{name}")
        op.execute("DROP TABLE IF EXISTS environment_fts")
    elif dialect == "postgresql":
        op.execute("DROP INDEX IF EXISTS environment_fts_idx")
