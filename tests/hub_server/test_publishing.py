"""Environment creation on a real database: confusable names versus a concurrent creation race."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from hub_server.accounts.admin import create_user, open_database
from hub_server.accounts.models import Owner
from hub_server.core.errors import BadRequest
from hub_server.core.settings import HubSettings
from hub_server.registry.publishing import create_environment


def test_the_same_name_created_concurrently_is_a_race_not_a_confusable(tmp_path: Path) -> None:
    """On Postgres (READ COMMITTED) a transaction that found no `race-env` can see one that a
    concurrent upload committed since; that must end on the unique constraint (the uploader
    retries and finds the winner), not as a 400 'too similar'."""
    engine = open_database(HubSettings(data_dir=tmp_path))
    create_user(engine, "rita")
    with Session(engine) as session:
        owner = session.exec(select(Owner).where(Owner.name == "rita")).one()
        create_environment(session, owner, "race-env", visibility="public")
        session.commit()

    with Session(engine) as session:
        owner = session.exec(select(Owner).where(Owner.name == "rita")).one()
        with pytest.raises(IntegrityError):
            create_environment(session, owner, "Race_Env", visibility="public")
    with Session(engine) as session:
        owner = session.exec(select(Owner).where(Owner.name == "rita")).one()
        with pytest.raises(BadRequest, match="too similar"):
            create_environment(session, owner, "raceenv", visibility="public")
