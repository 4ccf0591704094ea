"""Storing a validated file: blob first, then one transaction for the rows.

Shared by the twine endpoint and the REST push flow, so both give the same answers: an
identical re-upload is a no-op, a filename re-used with other bytes is refused, and under
concurrency exactly one of N identical uploads creates the rows (the unique constraint on
(environment, filename) decides; the losers find the winner's row and report the no-op).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from packaging.utils import canonicalize_version
from sqlalchemy import update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from hub_server.accounts.models import Owner
from hub_server.core.blobstore import BlobStore, content_key
from hub_server.core.db import session_scope
from hub_server.core.errors import BadRequest, FileExists
from hub_server.core.ids import utcnow
from hub_server.registry.models import (
    MAX_VERSION_LENGTH,
    DistFile,
    Environment,
    EnvironmentTag,
    Version,
)
from registry_index.names import ULTRA_REPLACEMENTS, is_stdlib_name, normalize, ultranormalize
from registry_index.sdk import SDK_DISTRIBUTION, SDK_OWNER, is_sdk_name

_ATTEMPTS = 5
# Stores each upload's blobs while its rows are written (see publish_file).
_BLOB_WRITERS = ThreadPoolExecutor(max_workers=8, thread_name_prefix="publish-blobs")


@dataclass(frozen=True)
class NewFile:
    """Everything about one file to be recorded (already validated by the caller)."""

    filename: str
    kind: str  # "wheel" | "sdist" | "source"
    sha256: str
    size: int
    version: str
    requires_python: str | None = None
    requires_dist: tuple[str, ...] = ()
    summary: str = ""
    metadata_raw: bytes | None = None
    metadata_sha256: str | None = None
    content_hash: str | None = None
    keywords: tuple[str, ...] = ()


@dataclass(frozen=True)
class EnvTarget:
    """Which environment receives the file: an existing id, or get-or-create by name.

    `absent`: the caller has just looked the environment up and found none (a new project),
    so it is created without looking again first; one created meanwhile by a concurrent
    upload still wins the unique constraint, and the retry finds it.
    """

    owner: Owner
    name: str
    environment_id: str | None = None
    visibility: str = "public"
    absent: bool = False


@dataclass(frozen=True)
class PublishResult:
    """The stored rows; `created` is False when the identical file was already there."""

    environment: Environment
    version: Version
    file: DistFile
    created: bool


def _find_env(session: Session, target: EnvTarget, normalized: str) -> Environment | None:
    if target.environment_id is not None:
        return session.get(Environment, target.environment_id)
    return session.exec(
        select(Environment).where(
            Environment.owner_id == target.owner.id, Environment.normalized_name == normalized
        )
    ).first()


def _existing(session: Session, env: Environment, new: NewFile) -> PublishResult | None:
    """The stored file if this exact file is already there; FileExists if the name is taken.

    One query reads both the name and the bytes, so a concurrent identical upload that
    commits between two reads cannot look like "these bytes under another name".
    """
    rows = session.exec(
        select(DistFile).where(
            DistFile.environment_id == env.id,
            sa.or_(
                col(DistFile.filename) == new.filename,
                sa.and_(col(DistFile.sha256) == new.sha256, col(DistFile.kind) == new.kind),
            ),
        )
    ).all()
    file = next((row for row in rows if row.filename == new.filename), None)
    if file is not None:
        if file.sha256 != new.sha256:
            raise FileExists(new.filename, file.sha256)
        version = session.get(Version, file.version_id)
        assert version is not None
        return PublishResult(env, version, file, created=False)
    if rows:
        raise BadRequest(
            f"File already exists ('{rows[0].filename}', with sha256 hash '{new.sha256}'): "
            f"these bytes were already uploaded under that name; {new.filename!r} cannot reuse them."
        )
    return None


def _get_or_create_version(
    session: Session, env: Environment, new: NewFile, *, new_env: bool = False
) -> Version:
    """The version row of `new`; an environment created in this transaction (`new_env`) has
    none yet, so it is not looked for."""
    canonical = canonicalize_version(new.version)
    version = (
        None
        if new_env
        else session.exec(
            select(Version).where(
                Version.environment_id == env.id, Version.canonical_version == canonical
            )
        ).first()
    )
    if version is None:
        version = Version(
            environment_id=env.id,
            version=new.version,
            canonical_version=canonical,
            content_hash=new.content_hash,
            summary=new.summary,
            requires_python=new.requires_python,
            requires_dist=json.dumps(list(new.requires_dist)),
        )
        session.add(version)
        session.flush()
    else:
        _fill_in(version, new)
        session.add(version)
    return version


def _fill_in(version: Version, new: NewFile) -> None:
    """A version created by its source archive learns its package facts from the wheel."""
    if version.content_hash is None:
        version.content_hash = new.content_hash
    if new.kind != "source":
        version.summary = version.summary or new.summary
        version.requires_python = version.requires_python or new.requires_python
        if version.requires_dist == "[]":
            version.requires_dist = json.dumps(list(new.requires_dist))


def bump_serials(session: Session, env: Environment, *, listing: bool = True) -> None:
    """Invalidate cached index pages of this environment and, when the owner's project list
    may have changed (`listing`), of its root index (see `hub_server.index.routes`).

    A new file of an existing project leaves the root index as it was, so it is not
    re-rendered after every upload."""
    # Core statements on the session's connection (same transaction): the ORM's bulk-update
    # machinery cost more than the updates themselves.
    connection = session.connection()
    envs, owners = Environment.__table__, Owner.__table__  # type: ignore[attr-defined]
    connection.execute(
        update(envs)
        .where(envs.c.id == env.id)
        .values(serial=envs.c.serial + 1, updated_at=utcnow())
    )
    if listing:
        connection.execute(
            update(owners).where(owners.c.id == env.owner_id).values(serial=owners.c.serial + 1)
        )


def create_environment(
    session: Session, owner: Owner, name: str, *, visibility: str, description: str = "",
    tags: list[str] | None = None,
) -> Environment:  # fmt: skip
    """Insert a new environment (the caller handles the unique-name race).

    Like PyPI, refuse names that would shadow the standard library or that a typo would
    confuse with a neighbour in the same namespace (`wordle` vs `w0rdle`), since
    `prime env install` by such a name could install the wrong code.
    """
    _check_new_name(session, owner, name)
    env = Environment(
        owner_id=owner.id, name=name, normalized_name=normalize(name),
        visibility=visibility, description=description,
    )  # fmt: skip
    session.add(env)
    session.flush()
    for tag in sorted(set(tags or [])):
        session.add(EnvironmentTag(environment_id=env.id, tag=tag))
    return env


MAX_TAGS = 20


def _tags_from_keywords(
    session: Session, env: Environment, keywords: tuple[str, ...], *, new_env: bool = False
) -> None:
    """An environment without tags takes its METADATA `Keywords` as tags, so twine and uv
    uploads get the same tags a `prime env push` sends; tags set since are left alone (one
    created in this transaction, `new_env`, has none)."""
    if not keywords:
        return
    if (
        not new_env
        and session.exec(
            select(EnvironmentTag).where(EnvironmentTag.environment_id == env.id)
        ).first()
    ):
        return
    tags = sorted({k.strip().lower()[:64] for k in keywords if k.strip()})[:MAX_TAGS]
    for tag in tags:
        session.add(EnvironmentTag(environment_id=env.id, tag=tag))


def _check_new_name(session: Session, owner: Owner, name: str) -> None:
    if is_sdk_name(name):
        raise BadRequest(
            f"{name!r} is reserved: every hub serves the environment SDK it runs with under "
            f"{SDK_OWNER}/{SDK_DISTRIBUTION}; choose another name."
        )
    if is_stdlib_name(name):
        raise BadRequest(
            f"{name!r} is the name of a Python standard-library module; choose another name so "
            "that installing the environment cannot shadow the standard library."
        )
    # The same name committed by a concurrent upload since this transaction looked for it
    # (READ COMMITTED on Postgres) is not a confusable neighbour: the insert then loses on the
    # unique constraint and the caller retries against the winner's row.
    other = session.exec(confusable_neighbour(owner.id, name)).first()
    if other is not None:
        raise BadRequest(
            f"{name!r} is too similar to the existing environment {owner.name}/{other} "
            "(names that differ only in separators, case, 'l'/'1' or 'o'/'0' are confusable); "
            f"push a new version of {other} or choose a clearly different name."
        )


def confusable_neighbour(owner_id: str, name: str) -> Any:
    """SQL: an environment of `owner_id` confusable with `name` but not the same name.

    The database compares the confusable forms through an expression index (migration
    hub_0003), so a namespace of 10,000 environments is not loaded and re-normalised in
    Python for every new name."""
    return _CONFUSABLE_NEIGHBOUR.params(
        owner_id=owner_id, similar=ultranormalize(name), same=normalize(name)
    )


def _confusable_form(column: Any) -> Any:
    """SQL for `ultranormalize(column)` (ASCII names: `lower` agrees on SQLite and Postgres).

    Literals, not bound parameters: the database uses the expression index of migration
    hub_0003 only for this exact expression."""
    expression = sa.func.lower(column)
    for old, new in ULTRA_REPLACEMENTS:
        expression = sa.func.replace(
            expression, sa.literal_column(f"'{old}'"), sa.literal_column(f"'{new}'")
        )
    return expression


# Built once: composing the nested expression on every upload cost more than running it.
_CONFUSABLE_NEIGHBOUR = (
    select(Environment.name)
    .where(
        Environment.owner_id == sa.bindparam("owner_id", type_=sa.String),
        _confusable_form(col(Environment.name)) == sa.bindparam("similar", type_=sa.String),
        Environment.normalized_name != sa.bindparam("same", type_=sa.String),
    )
    .limit(1)
)


def publish_file(
    engine: Engine,
    store: BlobStore,
    target: EnvTarget,
    new: NewFile,
    source: Path,
    user_id: str,
) -> PublishResult:
    """Record `new` (bytes at `source`, consumed) under `target`; idempotent and race-safe."""
    normalized = normalize(target.name)
    try:
        if len(new.version) > MAX_VERSION_LENGTH:
            # SQLite would store it and PostgreSQL refuse it: both refuse it here, with a 400.
            raise BadRequest(
                f"Version {new.version[:80]!r} is {len(new.version)} characters long; "
                f"use at most {MAX_VERSION_LENGTH}."
            )
        if not target.absent:
            with Session(engine, expire_on_commit=False) as session:
                env = _find_env(session, target, normalized)
                if env is not None:
                    existing = _existing(session, env, new)
                    if existing is not None:
                        return existing
        # Blobs are content-addressed: they are stored (written, fsynced, renamed) while the
        # row transaction runs, and the rows commit only once they are in place, so a row never
        # points at a missing blob; a lost race leaves no stray bytes (the winner wrote the same
        # key). Overlapping the fsyncs with the queries saves a third of an upload's time.
        # Each blob goes straight to a writer thread (the file and its metadata in parallel):
        # no thread in between that only waits for the others.
        writes = [
            _BLOB_WRITERS.submit(store.put_file, path, key)
            for path, key in _blobs(store, new, source)
        ]

        def stored() -> None:
            for write in writes:
                write.result()

        try:
            for attempt in range(_ATTEMPTS):
                try:
                    return _record(
                        engine, target, normalized, new, user_id,
                        recheck=attempt > 0, before_commit=stored,
                    )  # fmt: skip
                except IntegrityError:
                    continue  # a concurrent upload won a unique constraint; look again
                except BadRequest:
                    stored()
                    _drop_unreferenced(engine, store, new)
                    raise
            raise RuntimeError(f"could not record {new.filename} after {_ATTEMPTS} attempts")
        finally:
            wait(writes)  # never leave a write running on a path about to be removed
    finally:
        source.unlink(missing_ok=True)


def _blobs(store: BlobStore, new: NewFile, source: Path) -> list[tuple[Path, str]]:
    """The file and its PEP 658 metadata, as (scratch path, key) pairs to store together."""
    blobs = [(source, content_key(new.sha256))]
    if new.metadata_raw is not None and new.metadata_sha256 is not None:
        blobs.append((store.scratch_copy(new.metadata_raw), content_key(new.metadata_sha256)))
    return blobs


def _drop_unreferenced(engine: Engine, store: BlobStore, new: NewFile) -> None:
    """Remove the blob written for a file that lost a race with other bytes, if nothing uses it."""
    with Session(engine) as session:
        used = session.exec(select(DistFile.id).where(DistFile.sha256 == new.sha256)).first()
    if used is None:
        store.delete(content_key(new.sha256))


def _record(
    engine: Engine, target: EnvTarget, normalized: str, new: NewFile, user_id: str,
    recheck: bool, before_commit: Callable[[], object],
) -> PublishResult:  # fmt: skip
    """One transaction: get-or-create environment and version, insert the file row.

    The caller already looked for an existing file; only a retry after losing a race on a
    unique constraint (`recheck`) needs to look again.
    """
    with session_scope(engine) as session:
        env = None if target.absent and not recheck else _find_env(session, target, normalized)
        created = env is None
        if env is None:
            env = create_environment(
                session, target.owner, target.name,
                visibility=target.visibility, description=new.summary,
            )  # fmt: skip
        existing = _existing(session, env, new) if recheck else None
        if existing is not None:
            return existing
        version = _get_or_create_version(session, env, new, new_env=created)
        _tags_from_keywords(session, env, new.keywords, new_env=created)
        file = DistFile(
            environment_id=env.id,
            version_id=version.id,
            filename=new.filename,
            kind=new.kind,
            sha256=new.sha256,
            size=new.size,
            blob_key=content_key(new.sha256),
            metadata_sha256=new.metadata_sha256,
            metadata_blob_key=(content_key(new.metadata_sha256) if new.metadata_sha256 else None),
            requires_python=new.requires_python,
            uploaded_by=user_id,
        )
        session.add(file)
        session.flush()
        bump_serials(session, env, listing=created)
        before_commit()  # the blobs are stored (or this raises and nothing is committed)
        return PublishResult(env, version, file, created=True)
