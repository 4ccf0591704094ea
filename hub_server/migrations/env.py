"""Alembic environment: runs the hub's migrations on the connection `hub_server.core.db` hands in."""

from __future__ import annotations

from alembic import context
from sqlmodel import SQLModel

# Every table module, so `alembic revision --autogenerate` sees the whole schema.
import hub_server.accounts.models
import hub_server.adapters.models
import hub_server.evals.models
import hub_server.lab.models
import hub_server.registry.models  # noqa: F401
from hub_server.core.db import include_in_autogenerate

config = context.config
target_metadata = SQLModel.metadata


def run_migrations() -> None:
    """Migrate on the caller's connection, or open one from the URL (`alembic` CLI use)."""
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=True,
            include_object=include_in_autogenerate,
        )
        with context.begin_transaction():
            context.run_migrations()
        return
    from sqlalchemy import create_engine

    engine = create_engine(config.get_main_option("sqlalchemy.url") or "")
    with engine.connect() as conn:
        context.configure(
            connection=conn,
            target_metadata=target_metadata,
            render_as_batch=True,
            include_object=include_in_autogenerate,
        )
        with context.begin_transaction():
            context.run_migrations()


run_migrations()
