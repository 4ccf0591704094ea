"""Reading and managing environments over REST: list/search, info, versions, install records,
source downloads, yank. Routes only: the work is `registry.service` and `registry.search`."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Response
from fastapi.responses import FileResponse, RedirectResponse

from hub_server.core.errors import BadRequest
from hub_server.http.deps import BaseUrlDep, HubDep, PrincipalDep, SessionDep
from hub_server.registry import service
from hub_server.registry.search import EnvironmentQuery, SortField, search_environments
from hub_server.registry.views import summaries
from registry_index.bounds import MAX_STORED_INT
from registry_index.schemas.envelope import Envelope, Page
from registry_index.schemas.environments import (
    EnvironmentDetail,
    EnvironmentPatch,
    EnvironmentSummary,
)
from registry_index.schemas.versions import InstallRecord, VersionInfo, YankRequest

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
    page: Annotated[int, Query(ge=1, le=MAX_STORED_INT)] = 1,
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
    return Page(
        data=summaries(session, result.rows), total_count=result.total, page=page, per_page=per_page
    )


@router.get("/{owner_name}/{name}", response_model=Envelope[EnvironmentDetail])
def environment_info(
    owner_name: str, name: str, session: SessionDep, principal: PrincipalDep
) -> Envelope[EnvironmentDetail]:
    return Envelope(data=service.environment_detail(session, principal, owner_name, name))


@router.patch("/{owner_name}/{name}", response_model=Envelope[EnvironmentSummary])
def update_environment(
    owner_name: str, name: str, body: EnvironmentPatch, session: SessionDep, principal: PrincipalDep
) -> Envelope[EnvironmentSummary]:
    return Envelope(data=service.update_environment(session, principal, owner_name, name, body))


@router.get("/{owner_name}/{name}/versions", response_model=Envelope[list[VersionInfo]])
def list_versions(
    owner_name: str, name: str, base: BaseUrlDep, session: SessionDep, principal: PrincipalDep
) -> Envelope[list[VersionInfo]]:
    return Envelope(data=service.list_versions(session, principal, owner_name, name, base))


@router.get("/{owner_name}/{name}/@{ref}", response_model=Envelope[InstallRecord])
def install_record(
    owner_name: str, name: str, ref: str, base: BaseUrlDep, session: SessionDep,
    principal: PrincipalDep,
) -> Envelope[InstallRecord]:  # fmt: skip
    """What to install for `owner/name@ref` (`latest`, a version, or a specifier)."""
    return Envelope(data=service.install_record(session, principal, owner_name, name, ref, base))


@router.get("/{owner_name}/{name}/@{ref}/source", summary="Download the source archive")
def download_source(
    owner_name: str, name: str, ref: str, hub: HubDep, session: SessionDep, principal: PrincipalDep
) -> Response:
    source = service.source_archive(session, principal, owner_name, name, ref)
    if not hub.store.is_local:
        return RedirectResponse(hub.store.presign_get(source.blob_key, 300, source.filename), 307)
    return FileResponse(
        hub.store.local_path(source.blob_key),
        media_type="application/gzip",
        filename=source.filename,
    )


@router.post("/{owner_name}/{name}/@{ref}/yank", response_model=Envelope[VersionInfo])
def yank(
    owner_name: str, name: str, ref: str, base: BaseUrlDep, session: SessionDep,
    principal: PrincipalDep, body: YankRequest | None = None,
) -> Envelope[VersionInfo]:  # fmt: skip
    reason = body.reason if body else None
    return Envelope(
        data=service.set_yanked(session, principal, owner_name, name, ref, reason, True, base)
    )


@router.post("/{owner_name}/{name}/@{ref}/unyank", response_model=Envelope[VersionInfo])
def unyank(
    owner_name: str, name: str, ref: str, base: BaseUrlDep, session: SessionDep,
    principal: PrincipalDep,
) -> Envelope[VersionInfo]:  # fmt: skip
    return Envelope(
        data=service.set_yanked(session, principal, owner_name, name, ref, None, False, base)
    )
