"""The upload path stays cheap as a namespace grows: the confusable-name check is an index
probe, a new file of an existing project does not invalidate the owner's root index, and the
twine endpoint finds the token's own owners without another lookup."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from hub_server.accounts.models import Owner
from hub_server.admin import create_org, create_user, open_database, remove_member
from hub_server.core.blobstore import BlobStore
from hub_server.core.settings import HubSettings
from hub_server.registry.models import Environment, Version
from hub_server.registry.publishing import (
    CONFUSABLE_NEIGHBOUR,
    EnvTarget,
    NewFile,
    confusable_parameters,
    publish_file,
)
from registry_index.validation import UploadLimits, validate_distribution
from tests.hub_server.inproc import start_inproc_hub
from tests.hub_server.wheels import twine_upload_form, wheel_bytes, write_wheel


def test_the_confusable_name_lookup_uses_its_expression_index(tmp_path: Path) -> None:
    engine = open_database(HubSettings(data_dir=tmp_path))
    statement = CONFUSABLE_NEIGHBOUR.params(**confusable_parameters("owner-id", "W0rd_Le"))
    sql = str(statement.compile(engine, compile_kwargs={"literal_binds": True}))
    with engine.connect() as connection:
        plan = " ".join(str(row) for row in connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}"))
    assert "ix_environment_confusable" in plan, plan


def _publish(
    engine: Engine, store: BlobStore, tmp_path: Path, name: str, version: str, absent: bool = False
) -> None:
    wheel = write_wheel(tmp_path / f"{name}-{version}", name, version)
    validated = validate_distribution(wheel, wheel.name, UploadLimits(max_file_size=10**7))
    with Session(engine, expire_on_commit=False) as session:
        owner = session.exec(select(Owner).where(Owner.name == "una")).one()
    new = NewFile(
        filename=wheel.name,
        kind="wheel",
        sha256=validated.sha256,
        size=validated.size,
        version=version,
        metadata_raw=validated.metadata.raw,
        metadata_sha256=validated.metadata_sha256,
    )
    target = EnvTarget(owner=owner, name=name, absent=absent)
    assert publish_file(engine, store, target, new, wheel, owner.user_id or "").created


def _serials(engine: Engine) -> tuple[int, dict[str, int]]:
    with Session(engine) as session:
        owner = session.exec(select(Owner).where(Owner.name == "una")).one()
        envs = session.exec(select(Environment).where(Environment.owner_id == owner.id)).all()
        return owner.serial, {env.name: env.serial for env in envs}


def test_only_a_new_project_changes_the_root_index_serial(tmp_path: Path) -> None:
    settings = HubSettings(data_dir=tmp_path / "hub")
    engine = open_database(settings)
    store = BlobStore(settings.resolved_storage_url)
    create_user(engine, "una")
    start, _ = _serials(engine)

    _publish(engine, store, tmp_path, "alpha-env", "1.0.0")
    after_new_project, envs = _serials(engine)
    assert after_new_project > start and envs == {"alpha-env": 1}

    _publish(engine, store, tmp_path, "alpha-env", "1.0.1")
    after_new_file, envs = _serials(engine)
    assert after_new_file == after_new_project  # the project list did not change
    assert envs == {"alpha-env": 2}  # the project page did

    _publish(engine, store, tmp_path, "beta-env", "1.0.0")
    assert _serials(engine)[0] > after_new_file


def test_a_project_created_after_the_caller_looked_is_found_not_duplicated(
    tmp_path: Path,
) -> None:
    """The twine endpoint tells publish_file a project was absent when it looked (so it is
    created without looking again); if a concurrent upload created it since, the insert loses
    on the unique constraint and the file joins the winner's project."""
    settings = HubSettings(data_dir=tmp_path / "hub")
    engine = open_database(settings)
    store = BlobStore(settings.resolved_storage_url)
    create_user(engine, "una")
    _publish(engine, store, tmp_path, "gamma-env", "1.0.0")  # the concurrent winner
    _publish(engine, store, tmp_path, "gamma-env", "1.0.1", absent=True)  # looked before it
    with Session(engine) as session:
        envs = session.exec(select(Environment).where(Environment.name == "gamma-env")).all()
        versions = sorted(
            v.version
            for v in session.exec(select(Version).where(Version.environment_id == envs[0].id))
        )
    assert len(envs) == 1 and versions == ["1.0.0", "1.0.1"]


def test_the_twine_endpoint_takes_the_owner_from_the_principal_and_looks_up_any_other(
    tmp_path: Path,
) -> None:
    """A member's upload to its organisation uses the owner loaded with the token (no second
    lookup), and stops at once when the membership is removed; an admin's upload to an owner
    it is no member of is looked up; a missing owner is a 404 and a stranger's a 403."""
    with start_inproc_hub(tmp_path / "hub") as hub:
        token = hub.add_user("mia")
        engine = open_database(hub.settings)
        try:
            create_org(engine, "guild", ["mia"])
            client = hub.client()

            def upload(owner: str, name: str, secret: str) -> int:
                fields, files = twine_upload_form(name, "1.0.0", wheel_bytes(name, "1.0.0"))
                response = client.post(
                    f"/{owner}/legacy/", auth=("__token__", secret), data=fields, files=files
                )
                return int(response.status_code)

            assert upload("guild", "guild-env", token) == 200
            assert upload("mia", "own-env", token) == 200
            assert upload("guild", "admin-env", hub.admin_token) == 200
            assert upload("nobody", "lost-env", token) == 404
            assert upload("admin", "stray-env", token) == 403
            remove_member(engine, "guild", "mia")
            assert upload("guild", "late-env", token) == 403
        finally:
            engine.dispose()
