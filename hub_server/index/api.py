"""Routes of the package index pip and uv read: the SDK every hub serves (`/_sdk/…`), then
each owner's PEP 503/691 simple pages and file / PEP 658 metadata downloads.

The work is `index.service` (pages, downloads) and `index.sdk` (the SDK wheel). An anonymous
request for an unchanged page is answered on the event loop from the page cache after one
indexed query for the serial, with no thread hop.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import FileResponse, RedirectResponse
from sqlmodel import Session
from starlette.concurrency import run_in_threadpool

from hub_server.core.errors import HubError, NotFound
from hub_server.http.deps import HubDep, PrincipalDep, SessionDep
from hub_server.http.principal import resolve_principal
from hub_server.http.state import Hub
from hub_server.index import service
from hub_server.index.sdk import sdk_index_page, sdk_project_page, sdk_wheel
from hub_server.registry.access import env_not_found
from hub_server.registry.metadata import file_metadata
from registry_index.names import normalize
from registry_index.schemas.environments import Visibility
from registry_index.sdk import SDK_DISTRIBUTION, SDK_OWNER
from registry_index.simple import Format, negotiate

router = APIRouter(tags=["package index"])

_VARY = {"Vary": "Accept"}


class NotAcceptable(HubError):
    status = 406


def _negotiate(request: Request) -> tuple[Format, str]:
    wanted = request.query_params.get("format") or request.headers.get("accept")
    chosen = negotiate(wanted)
    if chosen is None:
        raise NotAcceptable(
            "Unsupported Accept type; ask for application/vnd.pypi.simple.v1+json, "
            "application/vnd.pypi.simple.v1+html or text/html.",
            dict(_VARY),
        )
    return chosen


def _page(page: bytes | str, content_type: str) -> Response:
    return Response(page, media_type=content_type, headers=_VARY)


# -- the SDK (before the owners' routes: `_sdk` is no owner) ---------------------------------


@router.api_route(
    f"/{SDK_OWNER}/simple/",
    methods=["GET", "HEAD"],
    summary="The SDK index: the one project every environment depends on",
)
def sdk_index(request: Request) -> Response:
    fmt, content_type = _negotiate(request)
    return _page(sdk_index_page(fmt), content_type)


@router.api_route(
    f"/{SDK_OWNER}/simple/{{project}}/",
    methods=["GET", "HEAD"],
    summary="The SDK wheel this hub runs with (PEP 503/691)",
)
def sdk_project(project: str, request: Request) -> Response:
    if normalize(project) != SDK_DISTRIBUTION:
        raise NotFound(f"The {SDK_OWNER} index holds only {SDK_DISTRIBUTION}.")
    if project != SDK_DISTRIBUTION:
        return RedirectResponse(f"/{SDK_OWNER}/simple/{SDK_DISTRIBUTION}/", status_code=301)
    fmt, content_type = _negotiate(request)
    return _page(sdk_project_page(fmt), content_type)


@router.get(f"/{SDK_OWNER}/simple/{{project}}", include_in_schema=False)
def sdk_project_no_slash(project: str) -> Response:
    return RedirectResponse(f"/{SDK_OWNER}/simple/{normalize(project)}/", status_code=301)


@router.api_route(
    f"/{SDK_OWNER}/files/{{project}}/{{filename}}",
    methods=["GET", "HEAD"],
    summary="Download the SDK wheel or its PEP 658 metadata",
)
def sdk_file(project: str, filename: str) -> Response:
    wheel = sdk_wheel()
    if normalize(project) == SDK_DISTRIBUTION and filename == wheel.filename:
        return Response(
            wheel.data,
            media_type="application/octet-stream",
            headers={
                "ETag": f'"{wheel.sha256}"',
                "Content-Disposition": f'attachment; filename="{wheel.filename}"',
            },
        )
    if normalize(project) == SDK_DISTRIBUTION and filename == f"{wheel.filename}.metadata":
        return Response(
            wheel.metadata, media_type="text/plain", headers={"ETag": f'"{wheel.metadata_sha256}"'}
        )
    raise NotFound(
        f"No file {filename!r} in {SDK_OWNER}/{project}; this hub serves {wheel.filename}."
    )


# -- each owner's index ---------------------------------------------------------------------


@router.api_route(
    "/{owner_name}/simple/",
    methods=["GET", "HEAD"],
    summary="Project list of one owner (PEP 503/691)",
)
async def simple_index(owner_name: str, request: Request) -> Response:
    hub: Hub = request.app.state.hub
    fmt, content_type = _negotiate(request)
    if "authorization" not in request.headers:
        row = service.owner_serial(hub.engine, owner_name)
        if row is None:
            raise NotFound(f"No owner named {owner_name!r} on this hub.")
        page = hub.pages.get(service.public_index_key(row, fmt))
        if page is not None:
            return _page(page, content_type)
    page = await run_in_threadpool(_index_page, request, hub, owner_name, fmt)
    return _page(page, content_type)


def _index_page(request: Request, hub: Hub, owner_name: str, fmt: Format) -> bytes:
    with Session(hub.engine, expire_on_commit=False) as session:
        principal = resolve_principal(request, hub, session)
        return service.index_page(session, hub.pages, principal, owner_name, fmt)


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
    if normalized == SDK_DISTRIBUTION:
        # The SDK every environment depends on is on each owner's index too (its files stay
        # the `_sdk` owner's; the name is reserved, so no owner's project can shadow it): an
        # installer given this one index, as the stock `prime env install` is
        # (`--extra-index-url HUB/OWNER/simple/`), finds the environment's SDK as well.
        if service.owner_serial(hub.engine, owner_name) is None:
            raise NotFound(f"No owner named {owner_name!r} on this hub.")
        return _page(sdk_project_page(fmt, files=f"../../../{SDK_OWNER}/files"), content_type)
    if "authorization" not in request.headers:
        row = service.project_serial(hub.engine, owner_name, normalized)
        if row is None or row.visibility != Visibility.PUBLIC:
            raise env_not_found(owner_name, project)
        page = hub.pages.get(service.project_key(row.id, row.serial, fmt))
        if page is not None:
            return _page(page, content_type)
    page = await run_in_threadpool(_project_page, request, hub, owner_name, normalized, fmt)
    return _page(page, content_type)


def _project_page(
    request: Request, hub: Hub, owner_name: str, normalized: str, fmt: Format
) -> bytes:
    with Session(hub.engine, expire_on_commit=False) as session:
        principal = resolve_principal(request, hub, session)
        return service.project_page(session, hub.pages, principal, owner_name, normalized, fmt)


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
    hub: HubDep,
    session: SessionDep,
    principal: PrincipalDep,
) -> Response:
    file, env = service.downloadable_file(session, principal, owner_name, project, filename)
    cache = "public" if env.visibility == Visibility.PUBLIC else "private"
    if filename.endswith(".metadata"):
        metadata = file_metadata(session, hub.store, file)
        if metadata is None:
            raise NotFound(f"{file.filename!r} has no separate metadata file (PEP 658).")
        return Response(
            metadata, media_type="text/plain", headers=_immutable(file.metadata_sha256, cache)
        )
    if request.method == "GET" and "range" not in request.headers:
        hub.downloads.add(file.id, env.id)  # written in batches: no second connection
    # The rows are read: the connection goes back to the pool before the bytes are sent, so a
    # slow client never keeps one (the session's objects stay loaded).
    session.close()
    if not hub.store.is_local:
        url = hub.store.presign_get(file.blob_key, 300, filename)
        return RedirectResponse(url, status_code=307)
    return FileResponse(
        hub.store.local_path(file.blob_key),
        media_type="application/octet-stream",
        headers=_immutable(file.sha256, cache),
        filename=filename,
    )


def _immutable(sha256: str | None, cache: str) -> dict[str, str]:
    """Headers of a download: its bytes never change (`cache`: public or private)."""
    return {"ETag": f'"{sha256}"', "Cache-Control": f"{cache}, max-age=31536000, immutable"}
