"""The twine / `uv publish` upload endpoint (`POST /legacy/`, PyPI's "legacy" API): routes.

Errors are plain text with the message also in the HTTP reason phrase, because that is all
twine prints. Everything that can refuse an upload without its body (the token, the owner,
the rate) is checked before the body is read; the work is `index.upload`.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import PlainTextResponse
from sqlmodel import Session
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

from hub_server.accounts.auth import Principal
from hub_server.accounts.models import Owner
from hub_server.core.errors import BadRequest, HubError, Unauthorized
from hub_server.core.out_of_space import out_of_space
from hub_server.http.deps import check_upload_rate
from hub_server.http.http_protocol import REASON_HEADER, latin1_reason
from hub_server.http.principal import AUTH_DEFERRED_KEY, PRINCIPAL_KEY, resolve_principal
from hub_server.http.state import Hub
from hub_server.index import upload

router = APIRouter(tags=["upload"])


def _error_response(error: HubError) -> Response:
    headers = dict(error.headers)
    headers[REASON_HEADER.decode()] = latin1_reason(error.message)
    return PlainTextResponse(error.message + "\n", status_code=error.status, headers=headers)


@router.post("/legacy/", summary="twine / uv publish upload (owner from the token)")
async def upload_default(request: Request) -> Response:
    return await _upload(request, None)


@router.post("/{owner_name}/legacy/", summary="twine / uv publish upload to one owner")
async def upload_to_owner(owner_name: str, request: Request) -> Response:
    return await _upload(request, owner_name)


async def _upload(request: Request, owner_name: str | None) -> Response:
    hub: Hub = request.app.state.hub
    try:
        if request.scope.get(AUTH_DEFERRED_KEY):
            return await _small_upload(request, hub, owner_name)
        # The request-limits middleware authenticated a request with a body before reading it
        # (its answer is reused); one it did not (no token, or a body it could not see coming)
        # is authenticated here, and everything that can refuse it is checked before the body
        # is read too.
        principal: Principal | None = request.scope.get(PRINCIPAL_KEY)
        if principal is None:
            principal = await run_in_threadpool(_authenticate, request, hub)
        upload.check_token(principal, hub.settings, request.headers.get("content-length"))
        # An owner the token's user belongs to came with the principal; only another one (an
        # admin's upload, or a refusal to come) is looked up.
        name = upload.target_owner_name(principal, owner_name)
        owner = principal.owners.get(name.lower())
        if owner is None:
            owner = await run_in_threadpool(upload.find_target_owner, hub.engine, name)
        _admit(request, hub, principal, owner)
        form = await request.form(max_files=1, max_fields=200)
        try:
            return await run_in_threadpool(_handle, hub, principal, owner, form)
        finally:
            await form.close()
    except HubError as error:
        return _error_response(error)
    except ClientDisconnect:
        # The client went away mid-body (an interrupted upload): nobody reads this answer, but
        # it is not an application error to log with a traceback.
        return _error_response(BadRequest("The upload was cut off before its end; try again."))
    except Exception as error:
        full = out_of_space(error)  # a full disk: the app's 507, with twine's reason phrase
        if full is None:
            raise
        return _error_response(full)


async def _small_upload(request: Request, hub: Hub, owner_name: str | None) -> Response:
    """An upload whose authentication the request-limits middleware left to this route: one
    whose declared body is no larger than an anonymous request may send (and is cut at that
    size). Its body is read first, and the caller is checked in the same thread-pool hop as
    the handler (one hop, not two), with the same refusals."""
    try:
        form = await request.form(max_files=1, max_fields=200)
    except (HTTPException, ClientDisconnect):
        # A malformed or cut-off body: the caller's own refusal (401, 403, 404) still comes
        # first.
        await run_in_threadpool(_admitted, request, hub, owner_name)
        raise
    try:
        return await run_in_threadpool(_admitted_and_handled, request, hub, owner_name, form)
    finally:
        await form.close()


def _admitted(request: Request, hub: Hub, owner_name: str | None) -> tuple[Principal, Owner]:
    """The caller and the target owner, after the checks `_upload` makes before a body."""
    principal = _authenticate(request, hub)
    upload.check_token(principal, hub.settings, request.headers.get("content-length"))
    name = upload.target_owner_name(principal, owner_name)
    owner = principal.owners.get(name.lower()) or upload.find_target_owner(hub.engine, name)
    _admit(request, hub, principal, owner)
    return principal, owner


def _admitted_and_handled(
    request: Request, hub: Hub, owner_name: str | None, form: FormData
) -> Response:
    principal, owner = _admitted(request, hub, owner_name)
    return _handle(hub, principal, owner, form)


def _handle(hub: Hub, principal: Principal, owner: Owner, form: FormData) -> Response:
    message = upload.handle_upload(hub.engine, hub.store, hub.settings, principal, owner, form)
    return PlainTextResponse(message + "\n")


def _admit(request: Request, hub: Hub, principal: Principal, owner: Owner) -> None:
    """403 when the token can write nothing of `owner`; 429 past the upload rate."""
    upload.check_owner(principal, owner)
    check_upload_rate(request, hub, principal)


def _authenticate(request: Request, hub: Hub) -> Principal:
    with Session(hub.engine, expire_on_commit=False) as session:
        principal = resolve_principal(request, hub, session)
    if principal is None:
        raise Unauthorized(
            "Uploading needs an API token: use username __token__ and your token as the password."
        )
    return principal
