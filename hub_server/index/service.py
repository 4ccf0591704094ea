"""The per-owner package index pip and uv read: rendered pages (cached by serial), downloads.

This is the hot path, so its statements are built once, at import. A page's cache key holds
the serial of what it shows (the owner's for the project list, the environment's for a
project page), which every upload, yank and visibility change bumps: a stale page is never
served. File URLs are relative, so cached pages are independent of the host name the client
used.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Row, bindparam
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from hub_server.accounts.auth import Principal
from hub_server.accounts.models import Owner
from hub_server.accounts.service import find_owner
from hub_server.core.cache import PageCache
from hub_server.core.errors import NotFound
from hub_server.core.rows import table_of
from hub_server.registry.access import can_read, readable_environment, reads_all_of
from hub_server.registry.models import DistFile, Environment, Version
from registry_index.names import normalize
from registry_index.schemas.environments import Visibility
from registry_index.schemas.versions import FileKind
from registry_index.simple import Format, ProjectFile, render_index_page, render_project_page

# Anonymous requests (pip and uv without credentials) take a fast path: one Core query on the
# event loop for the serial, then the cached page; no thread hop, no ORM session.
_OWNER_SERIAL = select(Owner.id, Owner.serial).where(Owner.name == bindparam("owner"))
_PROJECT_SERIAL = (
    select(Environment.id, Environment.serial, Environment.visibility)
    .join(Owner, col(Owner.id) == col(Environment.owner_id))
    .where(Owner.name == bindparam("owner"), Environment.normalized_name == bindparam("name"))
)
_ENVS = table_of(Environment)
_OWNER_PROJECTS = (
    sa.select(_ENVS.c.id, _ENVS.c.name, _ENVS.c.visibility)
    .where(_ENVS.c.owner_id == bindparam("owner_id"))
    .order_by(_ENVS.c.normalized_name)
)


def owner_serial(engine: Engine, owner_name: str) -> Row[str, int] | None:
    """(id, serial) of an owner, or None (the anonymous fast path)."""
    with engine.connect() as connection:
        return connection.execute(_OWNER_SERIAL, {"owner": owner_name.lower()}).first()


def project_serial(engine: Engine, owner_name: str, normalized: str) -> Row[str, int, str] | None:
    """(id, serial, visibility) of `owner/project`, or None (the anonymous fast path)."""
    with engine.connect() as connection:
        params = {"owner": owner_name.lower(), "name": normalized}
        return connection.execute(_PROJECT_SERIAL, params).first()


def index_page(
    session: Session, pages: PageCache, principal: Principal | None, owner_name: str, fmt: Format
) -> bytes:
    """The owner's project list as `principal` may see it (cached when it is shared)."""
    owner = find_owner(session, owner_name)
    if owner is None:
        raise NotFound(f"No owner named {owner_name!r} on this hub.")
    audience = "all" if reads_all_of(principal, owner) else "public"
    shared = principal is None or audience == "all"
    key = ("index", owner.id, owner.serial, audience, fmt)
    page = pages.get(key) if shared else None
    if page is not None:
        return page
    # Names and visibility only, through Core: at 10,000 projects, loading every row as an
    # ORM object took most of a re-render.
    rows = session.connection().execute(_OWNER_PROJECTS, {"owner_id": owner.id}).all()
    readable = set() if audience == "all" else _private_readable(session, principal, owner, rows)
    visible = [
        name
        for env_id, name, visibility in rows
        if audience == "all" or visibility == Visibility.PUBLIC or env_id in readable
    ]
    page = render_index_page(visible, fmt).encode()
    if shared:
        pages.put(key, page)
    return page


def public_index_key(row: Row[str, int], fmt: Format) -> tuple[Any, ...]:
    """The cache key of the anonymous project list `index_page` stores for `owner_serial`'s row."""
    return ("index", row.id, row.serial, "public", fmt)


def _private_readable(
    session: Session,
    principal: Principal | None,
    owner: Owner,
    rows: Sequence[Row[Any, Any, Any]],
) -> set[str]:
    """Ids of the private environments among `rows` (id, name, visibility) `principal` may read."""
    private = [row.id for row in rows if row.visibility != Visibility.PUBLIC]
    if principal is None or not private:
        return set()
    envs = session.exec(select(Environment).where(col(Environment.id).in_(private))).all()
    return {env.id for env in envs if can_read(principal, owner, env)}


def project_key(env_id: str, serial: int, fmt: Format) -> tuple[Any, ...]:
    """The cache key of a project page at this serial."""
    return ("project", env_id, serial, fmt)


def project_page(
    session: Session, pages: PageCache, principal: Principal | None, owner_name: str,
    normalized: str, fmt: Format,
) -> bytes:  # fmt: skip
    """One project's files (404 unless `principal` may read it), rendered once per serial."""
    _owner, env = readable_environment(session, principal, owner_name, normalized)
    key = project_key(env.id, env.serial, fmt)
    page = pages.get(key)
    if page is None:
        page = _render_project(session, env, fmt).encode()
        pages.put(key, page)
    return page


def _render_project(session: Session, env: Environment, fmt: Format) -> str:
    rows = session.exec(
        select(DistFile, Version)
        .join(Version, col(Version.id) == col(DistFile.version_id))
        .where(DistFile.environment_id == env.id, DistFile.kind != FileKind.SOURCE)
        .order_by(col(DistFile.filename))
    ).all()
    files = [
        ProjectFile(
            filename=file.filename,
            url=f"../../files/{env.normalized_name}/{file.filename}",
            sha256=file.sha256,
            size=file.size,
            upload_time=file.uploaded_at,
            requires_python=file.requires_python,
            yanked=(version.yanked_reason or True) if version.yanked else False,
            core_metadata_sha256=file.metadata_sha256,
        )
        for file, version in rows
    ]
    versions = session.exec(select(Version.version).where(Version.environment_id == env.id)).all()
    return render_project_page(env.normalized_name, files, fmt, versions)


def downloadable_file(
    session: Session, principal: Principal | None, owner_name: str, project: str, filename: str
) -> tuple[DistFile, Environment]:
    """The wheel or sdist of `owner/project` that `filename` (or its PEP 658 `.metadata`)
    names, if the caller may read it (source archives go through the API), and its
    environment; 404 otherwise."""
    stored_name = filename.removesuffix(".metadata")
    row = session.exec(
        select(DistFile, Environment, Owner)
        .join(Environment, col(Environment.id) == col(DistFile.environment_id))
        .join(Owner, col(Owner.id) == col(Environment.owner_id))
        .where(
            Owner.name == owner_name.lower(),
            Environment.normalized_name == normalize(project),
            DistFile.filename == stored_name,
            DistFile.kind != FileKind.SOURCE,
        )
    ).first()
    if row is None or not can_read(principal, row[2], row[1]):
        raise NotFound(f"No file {filename!r} in {owner_name}/{project}.")
    return row[0], row[1]
