"""Storing a validated file: the checks that can refuse it, then its blob beside one
transaction for the rows (when a blob is written, and why none is ever deleted: `publish_file`).

Shared by the twine endpoint and the REST push flow, so both give the same answers: an
identical re-upload is a no-op, a filename re-used with other bytes is refused, and under
concurrency exactly one of N identical uploads creates the rows (the unique constraint on
(environment, filename) decides; the losers find the winner's row and report the no-op).
"""

from __future__ import annotations

import json
import logging
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from packaging.utils import canonicalize_version
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from hub_server.accounts.models import Owner
from hub_server.core.blobstore import BlobStorage, content_key
from hub_server.core.errors import BadRequest, FileExists
from hub_server.core.ids import utcnow
from hub_server.core.rows import new_row, table_of
from hub_server.registry.models import (
    MAX_REQUIRES_PYTHON_LENGTH,
    MAX_VERSION_LENGTH,
    DistFile,
    Environment,
    EnvironmentTag,
    FileMetadata,
    Version,
)
from registry_index.errors import InvalidUpload
from registry_index.names import (
    ULTRA_REPLACEMENTS,
    is_stdlib_name,
    normalize,
    ultranormalize,
    validate_project_name,
)
from registry_index.schemas.environments import Visibility
from registry_index.schemas.versions import FileKind
from registry_index.sdk import SDK_DISTRIBUTION, SDK_OWNER, is_sdk_name

log = logging.getLogger(__name__)

_ATTEMPTS = 5
# Stores each upload's blobs while its rows are written (see publish_file).
_BLOB_WRITERS = ThreadPoolExecutor(max_workers=8, thread_name_prefix="publish-blobs")


@dataclass(frozen=True)
class NewFile:
    """Everything about one file to be recorded (already validated by the caller)."""

    filename: str
    kind: FileKind
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
    rubric_json: str | None = None  # the declared rubric of a `prime env push`


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
    visibility: Visibility = Visibility.PUBLIC
    absent: bool = False


@dataclass(frozen=True)
class PublishResult:
    """The ids of the stored rows; `created` is False when the identical file was already there."""

    environment_id: str
    version_id: str
    file_id: str
    created: bool


# Core tables and statements of the upload transaction, built once: composing a statement on
# every upload (and generating its cache key) cost more than running it, and ORM objects
# flushed through the unit of work cost more than the inserts themselves.
_ENVS = table_of(Environment)
_VERSIONS = table_of(Version)
_FILES = table_of(DistFile)
_TAGS = table_of(EnvironmentTag)
_METADATA = table_of(FileMetadata)
_OWNERS = table_of(Owner)
_ENV_BY_NAME = sa.select(_ENVS.c.id).where(
    _ENVS.c.owner_id == sa.bindparam("owner_id"),
    _ENVS.c.normalized_name == sa.bindparam("normalized"),
)
_ENV_BY_ID = sa.select(_ENVS.c.id).where(_ENVS.c.id == sa.bindparam("env_id"))
# One query reads both the name and the bytes (see `_existing`).
_SAME_NAME_OR_BYTES = sa.select(
    _FILES.c.id, _FILES.c.version_id, _FILES.c.filename, _FILES.c.sha256
).where(
    _FILES.c.environment_id == sa.bindparam("env_id"),
    sa.or_(
        _FILES.c.filename == sa.bindparam("filename"),
        sa.and_(_FILES.c.sha256 == sa.bindparam("sha256"), _FILES.c.kind == sa.bindparam("kind")),
    ),
)
_VERSION_BY_CANONICAL = sa.select(
    _VERSIONS.c.id,
    _VERSIONS.c.content_hash,
    _VERSIONS.c.summary,
    _VERSIONS.c.requires_python,
    _VERSIONS.c.requires_dist,
    _VERSIONS.c.rubric_json,
).where(
    _VERSIONS.c.environment_id == sa.bindparam("env_id"),
    _VERSIONS.c.canonical_version == sa.bindparam("canonical"),
)
# The files of one release (a version, however it is spelled) in one slot: its wheel, or its
# source archive (an sdist from twine, a source archive from `prime env push`).
_SAME_RELEASE_SLOT = (
    sa.select(_FILES.c.filename)
    .join(_VERSIONS, _VERSIONS.c.id == _FILES.c.version_id)
    .where(
        _FILES.c.environment_id == sa.bindparam("env_id"),
        _VERSIONS.c.canonical_version == sa.bindparam("canonical"),
        _FILES.c.kind.in_(sa.bindparam("kinds", expanding=True)),
        _FILES.c.filename != sa.bindparam("filename"),
    )
    .limit(1)
)
_HAS_TAGS = sa.select(_TAGS.c.tag).where(_TAGS.c.environment_id == sa.bindparam("env_id")).limit(1)
_BUMP_ENVIRONMENT = (
    sa.update(_ENVS)
    .where(_ENVS.c.id == sa.bindparam("b_env_id"))
    .values(
        serial=_ENVS.c.serial + 1,
        updated_at=sa.bindparam("b_now", type_=_ENVS.c.updated_at.type),
    )
)
_BUMP_OWNER = (
    sa.update(_OWNERS)
    .where(_OWNERS.c.id == sa.bindparam("b_owner_id"))
    .values(serial=_OWNERS.c.serial + 1)
)


def _find_env_id(connection: Connection, target: EnvTarget, normalized: str) -> str | None:
    if target.environment_id is not None:
        found = connection.execute(_ENV_BY_ID, {"env_id": target.environment_id})
    else:
        found = connection.execute(
            _ENV_BY_NAME, {"owner_id": target.owner.id, "normalized": normalized}
        )
    env_id: str | None = found.scalar()
    return env_id


def _existing(connection: Connection, env_id: str, new: NewFile) -> PublishResult | None:
    """The stored file if this exact file is already there; FileExists if the name is taken.

    One query reads both the name and the bytes, so a concurrent identical upload that
    commits between two reads cannot look like "these bytes under another name".
    """
    rows = connection.execute(
        _SAME_NAME_OR_BYTES,
        {"env_id": env_id, "filename": new.filename, "sha256": new.sha256, "kind": new.kind},
    ).all()
    file = next((row for row in rows if row.filename == new.filename), None)
    if file is not None:
        if file.sha256 != new.sha256:
            raise FileExists(new.filename, file.sha256)
        return PublishResult(env_id, file.version_id, file.id, created=False)
    if rows:
        raise BadRequest(
            f"File already exists ('{rows[0].filename}', with sha256 hash '{new.sha256}'): "
            f"these bytes were already uploaded under that name; {new.filename!r} cannot reuse them."
        )
    return None


def release_slot(kind: FileKind) -> list[FileKind]:
    """The kinds that share `kind`'s one place in a release: a version has one wheel and one
    source archive (an sdist or a `prime env push` source archive), never a second of either."""
    return [FileKind.WHEEL] if kind == FileKind.WHEEL else [FileKind.SDIST, FileKind.SOURCE]


def check_release_slot(
    connection: Connection, env_id: str, version: str, kind: FileKind, filename: str
) -> None:
    """Refuse a second wheel (or source archive) for a version that has one: a released
    version's code never changes, whatever the new file's build tag, tags, platform, name case
    or version spelling (`1.2`, `1.2.0.0`, `v1.2.0` are `1.2.0`: PEP 440 compares them equal,
    and so does the canonical form looked up here)."""
    taken = connection.execute(
        _SAME_RELEASE_SLOT,
        {
            "env_id": env_id,
            "canonical": canonicalize_version(version),
            "kinds": release_slot(kind),
            "filename": filename,
        },
    ).scalar()
    if taken is not None:
        what = "wheel" if kind == FileKind.WHEEL else "source archive"
        raise BadRequest(
            f"Version {version} already has a {what}, {taken!r}; a released version's code "
            f"never changes, so {filename!r} cannot be added to it (another build tag, "
            "platform or spelling of the version is the same release). Publish a new version."
        )


def _get_or_create_version(
    connection: Connection, env_id: str, new: NewFile, *, new_env: bool = False
) -> str:
    """The id of the version row of `new`; an environment created in this transaction
    (`new_env`) has none yet, so it is not looked for."""
    canonical = canonicalize_version(new.version)
    current = (
        None
        if new_env
        else connection.execute(
            _VERSION_BY_CANONICAL, {"env_id": env_id, "canonical": canonical}
        ).first()
    )
    if current is None:
        row = new_row(
            Version,
            environment_id=env_id,
            version=new.version,
            canonical_version=canonical,
            content_hash=new.content_hash,
            summary=new.summary,
            requires_python=new.requires_python,
            requires_dist=json.dumps(list(new.requires_dist)),
            rubric_json=new.rubric_json,
        )
        connection.execute(_VERSIONS.insert(), row)
        return str(row["id"])
    changes = _filled_in(current, new)
    if changes:
        connection.execute(
            sa.update(_VERSIONS).where(_VERSIONS.c.id == current.id).values(**changes)
        )
    return str(current.id)


def _filled_in(current: Any, new: NewFile) -> dict[str, str]:
    """A version created by its source archive learns its package facts from the wheel: the
    columns of `current` that `new` fills in."""
    changes = {}
    if current.content_hash is None and new.content_hash is not None:
        changes["content_hash"] = new.content_hash
    if current.rubric_json is None and new.rubric_json is not None:
        changes["rubric_json"] = new.rubric_json  # set once: a release never changes
    if new.kind != FileKind.SOURCE:
        if not current.summary and new.summary:
            changes["summary"] = new.summary
        if not current.requires_python and new.requires_python:
            changes["requires_python"] = new.requires_python
        if current.requires_dist == "[]" and new.requires_dist:
            changes["requires_dist"] = json.dumps(list(new.requires_dist))
    return changes


def bump_serials(session: Session, env: Environment, *, listing: bool = True) -> None:
    """Invalidate cached index pages of this environment and, when the owner's project list
    may have changed (`listing`), of its root index (see `hub_server.index.api`).

    A new file of an existing project leaves the root index as it was, so it is not
    re-rendered after every upload."""
    _bump(session.connection(), env.id, env.owner_id, listing=listing)


def _bump(connection: Connection, env_id: str, owner_id: str, *, listing: bool) -> None:
    connection.execute(_BUMP_ENVIRONMENT, {"b_env_id": env_id, "b_now": utcnow()})
    if listing:
        connection.execute(_BUMP_OWNER, {"b_owner_id": owner_id})


def _environment_fields(
    owner: Owner, name: str, visibility: str, description: str
) -> dict[str, Any]:
    return {
        "owner_id": owner.id,
        "name": name,
        "normalized_name": normalize(name),
        "visibility": visibility,
        "description": description,
    }


def create_environment(
    session: Session, owner: Owner, name: str, *, visibility: str, description: str = "",
    tags: list[str] | None = None,
) -> Environment:  # fmt: skip
    """Insert a new environment (the caller handles the unique-name race).

    Like PyPI, refuse names that would shadow the standard library or that a typo would
    confuse with a neighbour in the same namespace (`wordle` vs `w0rdle`), since
    `prime env install` by such a name could install the wrong code.
    """
    _lock_namespace(session.connection(), owner)
    _check_new_name(session.connection(), owner, name)
    env = Environment(**_environment_fields(owner, name, visibility, description))
    session.add(env)
    session.flush()
    for tag in sorted(set(tags or [])):
        session.add(EnvironmentTag(environment_id=env.id, tag=tag))
    return env


def _insert_environment(
    connection: Connection, owner: Owner, name: str, *, visibility: str, description: str
) -> str:
    """`create_environment` for the upload transaction, whose caller has checked the name
    (`_check_new_name`): the same row, one Core insert; returns the new id. The row starts at
    serial 1, as `_bump` would leave it: its first file is recorded in the same transaction,
    so no update follows the insert."""
    fields = _environment_fields(owner, name, visibility, description)
    row = new_row(Environment, serial=1, **fields)
    connection.execute(_ENVS.insert(), row)
    return str(row["id"])


MAX_TAGS = 20


def _tags_from_keywords(
    connection: Connection, env_id: str, keywords: tuple[str, ...], *, new_env: bool = False
) -> None:
    """An environment without tags takes its METADATA `Keywords` as tags, so twine and uv
    uploads get the same tags a `prime env push` sends; tags set since are left alone (one
    created in this transaction, `new_env`, has none)."""
    if not keywords:
        return
    if not new_env and connection.execute(_HAS_TAGS, {"env_id": env_id}).first() is not None:
        return
    tags = sorted({k.strip().lower()[:64] for k in keywords if k.strip()})[:MAX_TAGS]
    if tags:
        connection.execute(_TAGS.insert(), [{"environment_id": env_id, "tag": t} for t in tags])


def _lock_namespace(connection: Connection, owner: Owner) -> None:
    """Queue behind any other transaction creating an environment of `owner` (the owner row's
    write lock on PostgreSQL, the database's on SQLite), so that a `_check_new_name` after it
    sees every neighbour committed before; without it, concurrent uploads of confusable new
    names all passed the check and were all created. It bumps the owner's serial, which a new
    environment does anyway (its root index changes)."""
    connection.execute(_BUMP_OWNER, {"b_owner_id": owner.id})


def _check_new_name(connection: Connection, owner: Owner, name: str) -> None:
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
    other = connection.execute(CONFUSABLE_NEIGHBOUR, confusable_parameters(owner.id, name)).scalar()
    if other is not None:
        raise BadRequest(
            f"{name!r} is too similar to the existing environment {owner.name}/{other} "
            "(names that differ only in separators, case, 'l'/'1' or 'o'/'0' are confusable); "
            f"push a new version of {other} or choose a clearly different name."
        )


def confusable_parameters(owner_id: str, name: str) -> dict[str, str]:
    """The parameters of `CONFUSABLE_NEIGHBOUR` for a new `name` of `owner_id`."""
    return {"owner_id": owner_id, "similar": ultranormalize(name), "same": normalize(name)}


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


# SQL: an environment of `owner_id` confusable with a new name (`similar`, its ultranormalized
# form) but not the same name (`same`, its normalized form). The database compares the
# confusable forms through an expression index (migration hub_0003), so a namespace of 10,000
# environments is not loaded and re-normalised in Python for every new name. Built once and
# executed with its parameters: composing (or re-binding) the nested expression on every
# upload cost more than running it.
CONFUSABLE_NEIGHBOUR = (
    sa.select(_ENVS.c.name)
    .where(
        _ENVS.c.owner_id == sa.bindparam("owner_id", type_=sa.String),
        _confusable_form(_ENVS.c.name) == sa.bindparam("similar", type_=sa.String),
        _ENVS.c.normalized_name != sa.bindparam("same", type_=sa.String),
    )
    .limit(1)
)


def publish_file(
    engine: Engine,
    store: BlobStorage,
    target: EnvTarget,
    new: NewFile,
    source: Path | bytes,
    user_id: str,
) -> PublishResult:
    """Record `new` under `target`; idempotent and race-safe. Its bytes are `source`: a
    scratch file of `store` (consumed) or, for a small upload, the bytes themselves.

    Blobs are content-addressed and never deleted, so a committed row never points at a
    missing blob. Every check that can refuse the upload (the lengths of the name, version and
    Requires-Python, the filename or bytes already used, and for a new environment its name:
    SDK, standard library, confusable neighbour) is decided before the blob write starts, so
    those refusals write nothing. Only a race lost after the write began (a concurrent upload
    committed the same filename, these bytes under another name, or a confusable new name,
    meanwhile: see `_lock_namespace`) or a failure (the database) ends an upload whose blob
    is stored without a row; that blob is kept and logged, not deleted: a concurrent upload
    of the same bytes, in this or another worker, may have found it present, written
    nothing, and committed a row that relies on it. An unreferenced blob is harmless; the
    scratch file is always removed.
    """
    normalized = normalize(target.name)
    try:
        if len(new.version) > MAX_VERSION_LENGTH:
            # SQLite would store it and PostgreSQL refuse it: both refuse it here, with a 400.
            raise BadRequest(
                f"Version {new.version[:80]!r} is {len(new.version)} characters long; "
                f"use at most {MAX_VERSION_LENGTH}."
            )
        # Likewise for the other values that reach a column of bounded width: a twine upload's
        # project name comes from its METADATA, which allows any length (`prime env push`
        # checks it at resolve).
        try:
            validate_project_name(target.name)
        except InvalidUpload as exc:
            raise BadRequest(str(exc)) from None
        if new.requires_python and len(new.requires_python) > MAX_REQUIRES_PYTHON_LENGTH:
            raise BadRequest(
                f"Requires-Python is {len(new.requires_python)} characters long; use at most "
                f"{MAX_REQUIRES_PYTHON_LENGTH}."
            )
        if not target.absent:
            with engine.connect() as connection:
                env_id = _find_env_id(connection, target, normalized)
                if env_id is not None:
                    existing = _existing(connection, env_id, new)
                    if existing is not None:
                        return existing
                    check_release_slot(connection, env_id, new.version, new.kind, new.filename)
        write = _BlobWrite(store, source, content_key(new.sha256))
        try:
            for attempt in range(_ATTEMPTS):
                try:
                    return _record(
                        engine, target, normalized, new, user_id, recheck=attempt > 0, write=write
                    )
                except IntegrityError:
                    continue  # a concurrent upload won a unique constraint; look again
            raise RuntimeError(f"could not record {new.filename} after {_ATTEMPTS} attempts")
        except Exception as error:
            if write.started:
                log.info(
                    "kept blob %s of %s, possibly unreferenced: the upload ended without a row "
                    "after its blob write began (%s)", write.key, new.filename, error,
                )  # fmt: skip
            raise
        finally:
            write.settle()  # never leave a write running on a path about to be removed
    finally:
        if isinstance(source, Path):
            source.unlink(missing_ok=True)


class _BlobWrite:
    """An upload's blob, stored (written, fsynced, renamed) by a writer thread while its row
    transaction runs, which commits only once the blob is in place. Overlapping the fsyncs
    with the queries saves a third of an upload's time; the write starts only when the
    transaction has passed every check that can refuse the upload (see `publish_file`). The
    PEP 658 metadata is a row of the same transaction, not a blob."""

    def __init__(self, store: BlobStorage, source: Path | bytes, key: str) -> None:
        self._store, self._source, self.key = store, source, key
        self._future: Future[None] | None = None

    @property
    def started(self) -> bool:
        return self._future is not None

    def start(self) -> None:
        """Begin the write (once: a retried transaction reuses it)."""
        if self._future is None:
            source = self._source
            self._future = (
                _BLOB_WRITERS.submit(self._store.put_bytes, source, self.key)
                if isinstance(source, bytes)
                else _BLOB_WRITERS.submit(self._store.put_file, source, self.key)
            )

    def result(self) -> None:
        """Wait until the blob is stored; raises if it could not be."""
        self.start()
        assert self._future is not None
        self._future.result()

    def settle(self) -> None:
        """Wait for a started write to end, however it ends."""
        if self._future is not None:
            wait([self._future])


def _record(
    engine: Engine, target: EnvTarget, normalized: str, new: NewFile, user_id: str,
    recheck: bool, write: _BlobWrite,
) -> PublishResult:  # fmt: skip
    """One transaction: get-or-create environment and version, insert the file row; `write`
    starts once nothing but a lost race can refuse the file, and the rows commit after it.

    The caller already looked for an existing file; only a retry after losing a race on a
    unique constraint (`recheck`) needs to look again.
    """
    with engine.begin() as connection:
        env_id = (
            None if target.absent and not recheck else _find_env_id(connection, target, normalized)
        )
        created = env_id is None
        if env_id is None:
            _check_new_name(connection, target.owner, target.name)
        elif recheck:
            existing = _existing(connection, env_id, new)
            if existing is not None:
                return existing
        # Every check that can refuse the file is behind; no row is written yet, so the write
        # also overlaps the wait for the database's write lock (SQLite: concurrent uploads).
        write.start()
        if env_id is None:
            # Checked again under the namespace's lock: a confusable name committed since the
            # check above (a concurrent upload) refuses this one now, after its blob write.
            _lock_namespace(connection, target.owner)
            _check_new_name(connection, target.owner, target.name)
            env_id = _insert_environment(
                connection, target.owner, target.name,
                visibility=target.visibility, description=new.summary,
            )  # fmt: skip
        else:
            # The environment row's write lock first (its serial bump), so that the release
            # check below sees every file committed before: two different wheels of one
            # version uploaded at once cannot both pass it.
            _bump(connection, env_id, target.owner.id, listing=False)
            check_release_slot(connection, env_id, new.version, new.kind, new.filename)
        version_id = _get_or_create_version(connection, env_id, new, new_env=created)
        _tags_from_keywords(connection, env_id, new.keywords, new_env=created)
        file = new_row(
            DistFile,
            environment_id=env_id,
            version_id=version_id,
            filename=new.filename,
            kind=new.kind,
            sha256=new.sha256,
            size=new.size,
            blob_key=content_key(new.sha256),
            metadata_sha256=new.metadata_sha256 if new.metadata_raw is not None else None,
            requires_python=new.requires_python,
            uploaded_by=user_id,
        )
        connection.execute(_FILES.insert(), file)
        if file["metadata_sha256"] is not None:
            connection.execute(_METADATA.insert(), {"file_id": file["id"], "raw": new.metadata_raw})
        write.result()  # the blob is stored (or this raises and nothing is committed)
        return PublishResult(env_id, version_id, str(file["id"]), created=True)
