"""Engine creation and schema migration.

SQLite gets WAL mode and a busy timeout so readers never block the single writer and
concurrent uploads queue instead of failing; PostgreSQL is used as given.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlmodel import Session, create_engine

MIGRATIONS_DIR = Path(__file__).parent.parent / "migrations"


def make_engine(url: str) -> Engine:
    """An engine for `url`; SQLite files are created with WAL journaling."""
    if url.startswith("sqlite"):
        engine = create_engine(
            url, connect_args={"check_same_thread": False, "timeout": 30}, pool_size=20
        )

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            cursor = dbapi_conn.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA busy_timeout=30000")
            try:  # the leaderboard's intervals; SQLite has it when built with its maths functions
                cursor.execute("SELECT sqrt(4.0)")
            except sqlite3.OperationalError:
                dbapi_conn.create_function("sqrt", 1, math.sqrt, deterministic=True)
            cursor.close()

        return engine
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url.removeprefix("postgresql://")
    return create_engine(url, pool_size=10, max_overflow=20, pool_pre_ping=True)


# Structures that live beside the models: full-text search (migration web_0001: SQLite's FTS5
# table and its shadow tables, PostgreSQL's expression index) and the confusable-name
# expression index (hub_0003). They are not declared by the models, so autogenerate must not
# propose dropping them.
_NOT_MODELS = ("environment_fts", "ix_environment_confusable")


def include_in_autogenerate(
    _object: object, name: str | None, type_: str, _reflected: bool, _compare_to: object
) -> bool:
    """Alembic's `include_object` hook: compare everything but the full-text search objects."""
    return not (type_ in ("table", "index") and name is not None and name.startswith(_NOT_MODELS))


def alembic_config() -> Config:
    """Alembic config pointing at the hub's migration scripts (no alembic.ini needed)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return config


def migrate(engine: Engine) -> None:
    """Bring the schema to the newest revision; safe to run on every start."""
    config = alembic_config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "heads")


@contextmanager
def session_scope(engine: Engine) -> Iterator[Session]:
    """A session that commits on success and rolls back on any error."""
    with Session(engine, expire_on_commit=False) as session:
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise
