"""Reading and managing environments over REST: info, versions, install records, source
downloads, yank. Routes only: the work is `registry.service` (the listing is search.api's)."""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.responses import FileResponse, RedirectResponse

from hub_server.http.deps import BaseUrlDep, HubDep, PrincipalDep, SessionDep
from hub_server.registry import service
from registry_index.schemas.envelope import Envelope
from registry_index.schemas.environments import (
    EnvironmentDetail,
    EnvironmentPatch,
    EnvironmentSummary,
)
from registry_index.schemas.versions import InstallRecord, VersionInfo, YankRequest

router = APIRouter(prefix="/api/v1/environmentshub", tags=["environments"])


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
