"""LoRA adapters over REST (`/api/v1/adapters/…`, docs/api.md "Adapters"): list, read, download,
push (multipart: the two PEFT files), publish a Lab checkpoint, patch. Routes only: the work is
`adapters.service` and `adapters.publishing`."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import FileResponse, RedirectResponse
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException

from hub_server.adapters import publishing, service
from hub_server.core.errors import BadRequest
from hub_server.http.deps import (
    AuthDep,
    BaseUrlDep,
    HubDep,
    PrincipalDep,
    SessionDep,
    check_upload_rate,
)
from registry_index.bounds import MAX_STORED_INT
from registry_index.peft_adapter import FILES
from registry_index.schemas.adapters import (
    AdapterPatch,
    AdapterSummary,
    AdapterVersionInfo,
    LabPublish,
    PublishOptions,
)
from registry_index.schemas.envelope import Envelope, Page

router = APIRouter(prefix="/api/v1/adapters", tags=["adapters"])
_PARTS = f"an adapter push sends the files {' and '.join(FILES)}, once each, as multipart parts"
_MULTIPART = {
    "requestBody": {
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": list(FILES),
                    "properties": {name: {"type": "string", "format": "binary"} for name in FILES},
                }
            }
        },
        "required": True,
    }
}


@router.get("/", response_model=Page[AdapterSummary], summary="List adapters")
def list_adapters(
    session: SessionDep,
    principal: PrincipalDep,
    owner: str | None = None,
    page: Annotated[int, Query(ge=1, le=MAX_STORED_INT)] = 1,
    per_page: Annotated[int, Query(ge=1, le=100)] = 20,
) -> Page[AdapterSummary]:
    """The adapters the caller may read (of `owner` when given), last changed first."""
    rows, total = service.list_adapters(session, principal, owner, page, per_page)
    return Page(data=rows, total_count=total, page=page, per_page=per_page)


@router.get("/{owner_name}/{name}", response_model=Envelope[AdapterSummary])
def adapter_info(
    owner_name: str, name: str, session: SessionDep, principal: PrincipalDep
) -> Envelope[AdapterSummary]:
    return Envelope(data=service.adapter_summary(session, principal, owner_name, name))


@router.patch("/{owner_name}/{name}", response_model=Envelope[AdapterSummary])
def update_adapter(
    owner_name: str, name: str, body: AdapterPatch, session: SessionDep, principal: PrincipalDep
) -> Envelope[AdapterSummary]:
    return Envelope(data=service.update_adapter(session, principal, owner_name, name, body))


@router.get("/{owner_name}/{name}/versions", response_model=Envelope[list[AdapterVersionInfo]])
def list_versions(
    owner_name: str, name: str, base: BaseUrlDep, session: SessionDep, principal: PrincipalDep
) -> Envelope[list[AdapterVersionInfo]]:
    return Envelope(data=service.list_versions(session, principal, owner_name, name, base))


@router.get("/{owner_name}/{name}/@{ref}", response_model=Envelope[AdapterVersionInfo])
def version_info(
    owner_name: str, name: str, ref: str, base: BaseUrlDep, session: SessionDep,
    principal: PrincipalDep,
) -> Envelope[AdapterVersionInfo]:  # fmt: skip
    """The version `@ref` selects: `latest`, an exact version, or a specifier."""
    return Envelope(data=service.get_version(session, principal, owner_name, name, ref, base))


@router.get("/{owner_name}/{name}/@{ref}/files/{filename}", summary="Download an adapter file")
def download_file(
    owner_name: str, name: str, ref: str, filename: str, hub: HubDep, session: SessionDep,
    principal: PrincipalDep,
) -> Response:  # fmt: skip
    file = service.version_file(session, principal, owner_name, name, ref, filename)
    if not hub.store.is_local:
        return RedirectResponse(hub.store.presign_get(file.blob_key, 300, file.filename), 307)
    return FileResponse(
        hub.store.local_path(file.blob_key),
        media_type="application/octet-stream",
        filename=file.filename,
    )


@router.post(
    "/{owner_name}/{name}/versions",
    response_model=Envelope[AdapterVersionInfo],
    summary="Push a version (multipart: adapter_config.json, adapter_model.safetensors)",
    openapi_extra=_MULTIPART,
)
async def push_version(
    owner_name: str, name: str, request: Request, options: Annotated[PublishOptions, Query()],
    hub: HubDep, session: SessionDep, principal: AuthDep, base: BaseUrlDep,
) -> Envelope[AdapterVersionInfo]:  # fmt: skip
    """Everything that can refuse the push is checked before its body is read."""
    await run_in_threadpool(publishing.check_push, session, principal, owner_name, name, options)
    check_upload_rate(request, hub, principal)
    staged: dict[str, publishing.Staged] = {}
    try:
        form = await request.form(max_files=len(FILES), max_fields=0)
    except HTTPException as error:
        raise BadRequest(f"{error.detail.rstrip('.')}: {_PARTS}") from None
    try:
        for key, value in form.multi_items():
            if key not in FILES or key in staged or not isinstance(value, UploadFile):
                raise BadRequest(f"Unexpected form part {key!r}: {_PARTS}")
            limit = publishing.file_limit(hub.settings, key)
            staged[key] = await run_in_threadpool(
                publishing.stage, hub.store, value.file, key, limit
            )
        version = await run_in_threadpool(
            publishing.publish, session, hub.store, hub.settings, principal, owner_name, name,
            staged, options, base,
        )  # fmt: skip
    finally:
        await form.close()
        publishing.discard(staged)
    return Envelope(data=version)


@router.post(
    "/{owner_name}/{name}/versions/from-lab",
    response_model=Envelope[AdapterVersionInfo],
    summary="Publish one of the caller's Lab checkpoints as a version",
)
def publish_from_lab(
    owner_name: str, name: str, body: LabPublish, request: Request, hub: HubDep,
    session: SessionDep, principal: AuthDep, base: BaseUrlDep,
) -> Envelope[AdapterVersionInfo]:  # fmt: skip
    check_upload_rate(request, hub, principal)
    return Envelope(
        data=publishing.publish_from_lab(
            session, hub.engine, hub.store, hub.settings, principal, owner_name, name, body, base
        )
    )
