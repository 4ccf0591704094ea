"""Reading and managing environments: list/search, info, versions, install records, yank.

Every route applies the visibility rule through `access.readable_environment`, so a private
environment is a 404 for anyone who may not read it.
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import FileResponse, RedirectResponse
from sqlalchemy import func
from sqlmodel import Session, select

from hub_server.accounts.access import readable_environment, require_upload
from hub_server.accounts.models import Owner
from hub_server.core.errors import BadRequest, NotFound
from hub_server.http.deps import HubDep, PrincipalDep, SessionDep
from hub_server.registry.models import DistFile, Environment, EnvironmentTag, Version
from hub_server.registry.publishing import bump_serials
from hub_server.registry.push_api import public_base
from hub_server.registry.search import EnvironmentQuery, SortField, search_environments
from hub_server.registry.views import file_url, sort_key, summaries, version_info, version_infos
from registry_index.resolve import select_version
from registry_index.schemas.envelope import Envelope, Page
from registry_index.schemas.environments import (
    EnvironmentDetail,
    EnvironmentPatch,
    EnvironmentSummary,
)
from registry_index.schemas.versions import FileKind, InstallRecord, VersionInfo, YankRequest

router = APIRouter(prefix="/api/v1/environmentshub", tags=["environments"])


@router.get("/", response_model=Page[EnvironmentSummary], summary="List and search environments")
def list_environments(
    session: SessionDep,
    principal: PrincipalDep,
    search: str | None = None,
    tag: Annotated[list[str] | None, Query()] = None,
    owner: str | None = None,
    visibility: Literal["public", "private", "PUBLIC", "PRIVATE"] | None = None,
    mine: bool = False,
    sort: SortField = "updated_at",
    order: Literal["asc", "desc"] | None = None,
    page: Annotated[int, Query(ge=1)] = 1,
    per_page: Annotated[int, Query(ge=1, le=100)] = 20,
) -> Page[EnvironmentSummary]:
    if mine and principal is None:
        raise BadRequest("mine=true needs an API token.")
    result = search_environments(
        session,
        principal,
        EnvironmentQuery(
            text=search or "",
            tags=tuple(tag or ()),
            owner=owner,
            visibility=visibility,
            mine=mine,
            sort=sort,
            order=order,
            page=page,
            per_page=per_page,
        ),
    )
    rows, total = result.rows, result.total
    return Page(
        data=summaries(session, list(rows)), total_count=total, page=page, per_page=per_page
    )


@router.get("/{owner_name}/{name}", response_model=Envelope[EnvironmentDetail])
def environment_info(
    owner_name: str, name: str, session: SessionDep, principal: PrincipalDep
) -> Envelope[EnvironmentDetail]:
    owner, env = readable_environment(session, principal, owner_name, name)
    summary = summaries(session, [(env, owner)])[0]
    count = session.exec(select(func.count()).where(Version.environment_id == env.id)).one()
    return Envelope(data=EnvironmentDetail(**summary.model_dump(), versions_count=count))


@router.patch("/{owner_name}/{name}", response_model=Envelope[EnvironmentSummary])
def update_environment(
    owner_name: str, name: str, body: EnvironmentPatch, session: SessionDep, principal: PrincipalDep
) -> Envelope[EnvironmentSummary]:
    owner, env = readable_environment(session, principal, owner_name, name)
    require_upload(principal, owner, env)
    if body.description is not None:
        env.description = body.description
    if body.visibility is not None:
        env.visibility = body.visibility
    session.add(env)
    if body.tags is not None:
        for row in session.exec(
            select(EnvironmentTag).where(EnvironmentTag.environment_id == env.id)
        ):
            session.delete(row)
        session.flush()
        for tag in sorted(set(body.tags)):
            session.add(EnvironmentTag(environment_id=env.id, tag=tag))
    bump_serials(session, env)
    session.commit()
    session.refresh(env)
    return Envelope(data=summaries(session, [(env, owner)])[0])


@router.get("/{owner_name}/{name}/versions", response_model=Envelope[list[VersionInfo]])
def list_versions(
    owner_name: str, name: str, request: Request, hub: HubDep, session: SessionDep,
    principal: PrincipalDep,
) -> Envelope[list[VersionInfo]]:  # fmt: skip
    owner, env = readable_environment(session, principal, owner_name, name)
    return Envelope(data=version_infos(session, public_base(request, hub), owner, env))


def _select(session: Session, env: Environment, owner: Owner, ref: str) -> Version:
    versions = list(session.exec(select(Version).where(Version.environment_id == env.id)).all())
    spec = None if ref == "latest" else ref
    try:
        chosen = select_version([(sort_key(v), v.yanked) for v in versions], spec)
    except LookupError as exc:
        raise NotFound(f"Environment {owner.name}/{env.name}: {exc}") from None
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    return next(v for v in versions if sort_key(v) == chosen)


@router.get("/{owner_name}/{name}/@{ref}", response_model=Envelope[InstallRecord])
def install_record(
    owner_name: str, name: str, ref: str, request: Request, hub: HubDep, session: SessionDep,
    principal: PrincipalDep,
) -> Envelope[InstallRecord]:  # fmt: skip
    """What to install for `owner/name@ref` (`latest`, a version, or a specifier)."""
    owner, env = readable_environment(session, principal, owner_name, name)
    version = _select(session, env, owner, ref)
    files = session.exec(select(DistFile).where(DistFile.version_id == version.id)).all()
    base = public_base(request, hub)
    wheel = next(
        (f for f in sorted(files, key=lambda f: f.filename) if f.kind == FileKind.WHEEL), None
    )
    source = next((f for f in files if f.kind == FileKind.SOURCE), None)
    requires = json.loads(version.requires_dist)
    index_url = f"{base}/{owner.name}/simple/"
    source_link = file_url(base, owner, env, source, version.version) if source else None
    return Envelope(
        data=InstallRecord(
            id=env.id,
            owner=owner.name,
            name=env.name,
            package_name=env.normalized_name,
            semantic_version=version.version,
            version_id=version.id,
            content_hash=version.content_hash,
            visibility=env.visibility,  # type: ignore[arg-type]
            yanked=version.yanked,
            yanked_reason=version.yanked_reason,
            requires_python=version.requires_python,
            requires_dist=requires,
            simple_index_url=index_url,
            install_index_url=index_url,
            wheel_url=file_url(base, owner, env, wheel, version.version) if wheel else None,
            wheel_sha256=wheel.sha256 if wheel else None,
            wheel_filename=wheel.filename if wheel else None,
            source_url=source_link,
            package_url=source_link,
            url_dependencies=[r for r in requires if " @ " in r.split(";")[0]],
            created_at=version.created_at,
        )
    )


@router.get("/{owner_name}/{name}/@{ref}/source", summary="Download the source archive")
def download_source(
    owner_name: str, name: str, ref: str, hub: HubDep, session: SessionDep, principal: PrincipalDep
) -> Response:
    owner, env = readable_environment(session, principal, owner_name, name)
    version = _select(session, env, owner, ref)
    source = session.exec(
        select(DistFile).where(DistFile.version_id == version.id, DistFile.kind == FileKind.SOURCE)
    ).first()
    if source is None:
        raise NotFound(
            f"{owner.name}/{env.name}@{version.version} has no source archive (it was uploaded "
            "with twine, not `prime env push`); install the wheel instead."
        )
    if not hub.store.is_local:
        return RedirectResponse(hub.store.presign_get(source.blob_key, 300, source.filename), 307)
    return FileResponse(
        hub.store.local_path(source.blob_key),
        media_type="application/gzip",
        filename=source.filename,
    )


def _set_yanked(
    owner_name: str, name: str, ref: str, reason: str | None, yanked: bool,
    request: Request, hub: HubDep, session: SessionDep, principal: PrincipalDep,
) -> Envelope[VersionInfo]:  # fmt: skip
    owner, env = readable_environment(session, principal, owner_name, name)
    require_upload(principal, owner, env)
    versions = session.exec(select(Version).where(Version.environment_id == env.id)).all()
    version = next((v for v in versions if v.version == ref or str(sort_key(v)) == ref), None)
    if version is None:
        known = ", ".join(v.version for v in sorted(versions, key=sort_key)) or "none"
        raise NotFound(f"{owner.name}/{env.name} has no version {ref!r} (versions: {known}).")
    version.yanked = yanked
    version.yanked_reason = reason if yanked else None
    session.add(version)
    bump_serials(session, env)
    session.commit()
    files = session.exec(select(DistFile).where(DistFile.version_id == version.id)).all()
    return Envelope(data=version_info(public_base(request, hub), owner, env, version, files))


@router.post("/{owner_name}/{name}/@{ref}/yank", response_model=Envelope[VersionInfo])
def yank(
    owner_name: str, name: str, ref: str, request: Request, hub: HubDep, session: SessionDep,
    principal: PrincipalDep, body: YankRequest | None = None,
) -> Envelope[VersionInfo]:  # fmt: skip
    reason = body.reason if body else None
    return _set_yanked(owner_name, name, ref, reason, True, request, hub, session, principal)


@router.post("/{owner_name}/{name}/@{ref}/unyank", response_model=Envelope[VersionInfo])
def unyank(
    owner_name: str, name: str, ref: str, request: Request, hub: HubDep, session: SessionDep,
    principal: PrincipalDep,
) -> Envelope[VersionInfo]:  # fmt: skip
    return _set_yanked(owner_name, name, ref, None, False, request, hub, session, principal)
