"""Per-owner package index: PEP 503/691 simple pages, file and PEP 658 metadata downloads.

This is what pip and uv talk to, so it is the hot path: a project page is one indexed query
for the environment (to check visibility and read its serial) and, when the serial is
unchanged, a cached rendered page. File URLs are relative, so cached pages are independent
of the host name the client used.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from fastapi import APIRouter, BackgroundTasks, Request, Response
from fastapi.responses import FileResponse, RedirectResponse
from sqlalchemy import Row, Select, bindparam, update
from sqlmodel import Session, col, select
from starlette.concurrency import run_in_threadpool

from hub_server.accounts.access import can_read, env_not_found, find_owner, readable_environment
from hub_server.accounts.auth import Principal
from hub_server.accounts.models import Owner
from hub_server.core.errors import HubError, NotFound
from hub_server.http.deps import HubDep, PrincipalDep, SessionDep
from hub_server.http.principal import resolve_principal
from hub_server.http.state import Hub
from hub_server.registry.metadata import file_metadata
from hub_server.registry.models import DistFile, Environment, Version
from registry_index import scopes
from registry_index.names import normalize
from registry_index.schemas.environments import Visibility
from registry_index.schemas.versions import FileKind
from registry_index.simple import ProjectFile, negotiate, render_index_page, render_project_page

router = APIRouter(tags=["package index"])

_VARY = {"Vary": "Accept"}


class NotAcceptable(HubError):
    status = 406


def _negotiate(request: Request) -> tuple[str, str]:
    wanted = request.query_params.get("format") or request.headers.get("accept")
    chosen = negotiate(wanted)
    if chosen is None:
        raise NotAcceptable(
            "Unsupported Accept type; ask for application/vnd.pypi.simple.v1+json, "
            "application/vnd.pypi.simple.v1+html or text/html.",
            dict(_VARY),
        )
    return chosen


def _owner_or_404(session: Session, owner_name: str) -> Owner:
    owner = find_owner(session, owner_name)
    if owner is None:
        raise NotFound(f"No owner named {owner_name!r} on this hub.")
    return owner


def _sees_all(principal: Principal | None, owner: Owner) -> bool:
    """True when the caller can read every environment of `owner` (one shared cache entry)."""
    if principal is None:
        return False
    reaches = principal.user.is_admin or owner.id in principal.owner_ids
    return reaches and scopes.allows(principal.scopes, "read", owner.name)


# Anonymous requests (pip and uv without credentials) take a fast path: one Core query on the
# event loop for the serial, then the cached page; no thread hop, no ORM session.
_OWNER_SERIAL = select(Owner.id, Owner.serial).where(Owner.name == bindparam("owner"))
_PROJECT_SERIAL = (
    select(Environment.id, Environment.serial, Environment.visibility)
    .join(Owner, Owner.id == Environment.owner_id)  # type: ignore[arg-type]
    .where(Owner.name == bindparam("owner"), Environment.normalized_name == bindparam("name"))
)


_ENVS = Environment.__table__  # type: ignore[attr-defined]
_OWNER_PROJECTS = (
    sa.select(_ENVS.c.id, _ENVS.c.name, _ENVS.c.visibility)
    .where(_ENVS.c.owner_id == bindparam("owner_id"))
    .order_by(_ENVS.c.normalized_name)
)


def _first(hub: Hub, statement: Select, **params: str) -> Row | None:  # type: ignore[type-arg]
    with hub.engine.connect() as connection:
        return connection.execute(statement, params).first()


def _page(page: bytes, content_type: str) -> Response:
    return Response(page, media_type=content_type, headers=_VARY)


@router.api_route(
    "/{owner_name}/simple/",
    methods=["GET", "HEAD"],
    summary="Project list of one owner (PEP 503/691)",
)
async def simple_index(owner_name: str, request: Request) -> Response:
    hub: Hub = request.app.state.hub
    fmt, content_type = _negotiate(request)
    if "authorization" not in request.headers:
        row = _first(hub, _OWNER_SERIAL, owner=owner_name.lower())
        if row is None:
            raise NotFound(f"No owner named {owner_name!r} on this hub.")
        page = hub.pages.get(("index", row.id, row.serial, "public", fmt))
        if page is not None:
            return _page(page, content_type)
    page = await run_in_threadpool(_render_index, request, hub, owner_name, fmt)
    return _page(page, content_type)


def _render_index(request: Request, hub: Hub, owner_name: str, fmt: str) -> bytes:
    with Session(hub.engine, expire_on_commit=False) as session:
        principal = resolve_principal(request, hub, session)
        owner = _owner_or_404(session, owner_name)
        audience = "all" if _sees_all(principal, owner) else "public"
        shared = principal is None or audience == "all"
        key = ("index", owner.id, owner.serial, audience, fmt)
        page = hub.pages.get(key) if shared else None
        if page is not None:
            return page
        # Names and visibility only, through Core: at 10,000 projects, loading every row as
        # an ORM object took most of a re-render (449 ms; now about 20 ms).
        rows = session.connection().execute(_OWNER_PROJECTS, {"owner_id": owner.id}).all()
        readable = (
            set() if audience == "all" else _private_readable(session, principal, owner, rows)
        )
        visible = [
            name
            for env_id, name, visibility in rows
            if audience == "all" or visibility == Visibility.PUBLIC or env_id in readable
        ]
        page = render_index_page(visible, fmt).encode()  # type: ignore[arg-type]
        if shared:
            hub.pages.put(key, page)
        return page


def _private_readable(
    session: Session,
    principal: Principal | None,
    owner: Owner,
    rows: Sequence[Row[Any]],
) -> set[str]:
    """Ids of the private environments among `rows` (id, name, visibility) `principal` may read."""
    private = [row.id for row in rows if row.visibility != Visibility.PUBLIC]
    if principal is None or not private:
        return set()
    envs = session.exec(select(Environment).where(col(Environment.id).in_(private))).all()
    return {env.id for env in envs if can_read(principal, owner, env)}


@router.get("/{owner_name}/simple/{project}", include_in_schema=False)
def simple_project_no_slash(owner_name: str, project: str) -> Response:
    return RedirectResponse(f"/{owner_name}/simple/{normalize(project)}/", status_code=301)


@router.api_route(
    "/{owner_name}/simple/{project}/",
    methods=["GET", "HEAD"],
    summary="One project's files (PEP 503/691)",
)
async def simple_project(owner_name: str, project: str, request: Request) -> Response:
    hub: Hub = request.app.state.hub
    fmt, content_type = _negotiate(request)
    normalized = normalize(project)
    if normalized != project:
        return RedirectResponse(f"/{owner_name}/simple/{normalized}/", status_code=301)
    if "authorization" not in request.headers:
        row = _first(hub, _PROJECT_SERIAL, owner=owner_name.lower(), name=normalized)
        if row is None or row.visibility != Visibility.PUBLIC:
            raise env_not_found(owner_name, project)
        page = hub.pages.get(("project", row.id, row.serial, fmt))
        if page is not None:
            return _page(page, content_type)
    page = await run_in_threadpool(_project_page, request, hub, owner_name, normalized, fmt)
    return _page(page, content_type)


def _project_page(request: Request, hub: Hub, owner_name: str, normalized: str, fmt: str) -> bytes:
    with Session(hub.engine, expire_on_commit=False) as session:
        principal = resolve_principal(request, hub, session)
        _owner, env = readable_environment(session, principal, owner_name, normalized)
        key = ("project", env.id, env.serial, fmt)
        page = hub.pages.get(key)
        if page is None:
            page = _render_project(session, env, fmt).encode()
            hub.pages.put(key, page)
        return page


def _render_project(session: Session, env: Environment, fmt: str) -> str:
    rows = session.exec(
        select(DistFile, Version)
        .join(Version, Version.id == DistFile.version_id)  # type: ignore[arg-type]
        .where(DistFile.environment_id == env.id, DistFile.kind != FileKind.SOURCE)
        .order_by(DistFile.filename)  # type: ignore[arg-type]
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
    return render_project_page(env.normalized_name, files, fmt, versions)  # type: ignore[arg-type]


def _count_download(hub: Hub, file_id: str, env_id: str) -> None:
    with Session(hub.engine) as session:
        session.execute(
            update(DistFile).where(DistFile.id == file_id).values(downloads=DistFile.downloads + 1)  # type: ignore[arg-type]
        )
        session.execute(
            update(Environment)
            .where(Environment.id == env_id)  # type: ignore[arg-type]
            .values(downloads=Environment.downloads + 1)
        )
        session.commit()


@router.api_route(
    "/{owner_name}/files/{project}/{filename}",
    methods=["GET", "HEAD"],
    summary="Download a file or its PEP 658 metadata",
)
def download(
    owner_name: str,
    project: str,
    filename: str,
    request: Request,
    background: BackgroundTasks,
    hub: HubDep,
    session: SessionDep,
    principal: PrincipalDep,
) -> Response:
    wants_metadata = filename.endswith(".metadata")
    stored_name = filename.removesuffix(".metadata") if wants_metadata else filename
    row = session.exec(
        select(DistFile, Environment, Owner)
        .join(Environment, Environment.id == DistFile.environment_id)  # type: ignore[arg-type]
        .join(Owner, Owner.id == Environment.owner_id)  # type: ignore[arg-type]
        .where(
            Owner.name == owner_name.lower(),
            Environment.normalized_name == normalize(project),
            DistFile.filename == stored_name,
            DistFile.kind != FileKind.SOURCE,
        )
    ).first()
    if row is None or not can_read(principal, row[2], row[1]):
        raise NotFound(f"No file {filename!r} in {owner_name}/{project}.")
    file, env, _owner = row
    cache = "public" if env.visibility == Visibility.PUBLIC else "private"
    if wants_metadata:
        metadata = file_metadata(session, hub.store, file)
        if metadata is None:
            raise NotFound(f"{stored_name!r} has no separate metadata file (PEP 658).")
        return Response(
            metadata, media_type="text/plain", headers=_immutable(file.metadata_sha256, cache)
        )
    if request.method == "GET" and "range" not in request.headers:
        background.add_task(_count_download, hub, file.id, env.id)
    if not hub.store.is_local:
        url = hub.store.presign_get(file.blob_key, 300, filename)
        return RedirectResponse(url, status_code=307, background=background)
    return FileResponse(
        hub.store.local_path(file.blob_key),
        media_type="application/octet-stream",
        headers=_immutable(file.sha256, cache),
        filename=filename,
        background=background,
    )


def _immutable(sha256: str | None, cache: str) -> dict[str, str]:
    """Headers of a download: its bytes never change (`cache`: public or private)."""
    return {"ETag": f'"{sha256}"', "Cache-Control": f"{cache}, max-age=31536000, immutable"}
