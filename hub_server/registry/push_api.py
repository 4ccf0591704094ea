"""Routes of the `prime env push` protocol (resolve, reserve, PUT, finalize); the work is
`registry.push`. The PUT streams the bytes to a scratch file, so memory stays flat."""

from __future__ import annotations

import hashlib
import hmac
import time
from pathlib import Path

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from hub_server.core.errors import BadRequest, TooLarge
from hub_server.http.deps import AuthDep, BaseUrlDep, HubDep, SessionDep, check_upload_rate
from hub_server.http.state import Hub
from hub_server.registry import push
from hub_server.registry.models import PendingUpload
from registry_index.schemas.envelope import Envelope
from registry_index.schemas.push import (
    FinalizeResult,
    PutResult,
    ResolveRequest,
    ResolveResponse,
    SourceReservation,
    UploadRequest,
    WheelReservation,
)
from registry_index.schemas.versions import FileKind

router = APIRouter(prefix="/api/v1/environmentshub", tags=["push"])


@router.post("/resolve", response_model=Envelope[ResolveResponse])
def resolve(
    body: ResolveRequest, principal: AuthDep, session: SessionDep
) -> Envelope[ResolveResponse]:
    """Get or create `owner/name` (owner: owner_slug, team_slug, else the caller)."""
    return Envelope(data=push.resolve(session, principal, body))


def _reserve(
    request: Request, hub: Hub, base: str, session: SessionDep, principal: AuthDep, env_id: str,
    body: UploadRequest, kind: FileKind,
) -> tuple[PendingUpload, str]:  # fmt: skip
    env = push.writable_environment(session, principal, env_id)
    check_upload_rate(request, hub, principal)
    pending, secret = push.reserve(session, hub.settings, principal, env, body, kind)
    return pending, push.upload_url(hub.store, hub.settings, base, pending, secret)


@router.post("/{env_id}/wheels", response_model=Envelope[WheelReservation])
def reserve_wheel(
    env_id: str, body: UploadRequest, request: Request, hub: HubDep, base: BaseUrlDep,
    session: SessionDep, principal: AuthDep,
) -> Envelope[WheelReservation]:  # fmt: skip
    pending, url = _reserve(request, hub, base, session, principal, env_id, body, FileKind.WHEEL)
    return Envelope(
        data=WheelReservation(wheel_id=pending.id, upload_url=url, expires_at=pending.expires_at)
    )


@router.post("/{env_id}/versions", response_model=Envelope[SourceReservation])
@router.post(
    "/{env_id}/sources", response_model=Envelope[SourceReservation], include_in_schema=False
)
def reserve_source(
    env_id: str, body: UploadRequest, request: Request, hub: HubDep, base: BaseUrlDep,
    session: SessionDep, principal: AuthDep,
) -> Envelope[SourceReservation]:  # fmt: skip
    pending, url = _reserve(request, hub, base, session, principal, env_id, body, FileKind.SOURCE)
    return Envelope(
        data=SourceReservation(version_id=pending.id, upload_url=url, expires_at=pending.expires_at)
    )


@router.put("/uploads/{upload_id}", response_model=Envelope[PutResult])
async def put_bytes(upload_id: str, token: str, request: Request) -> Envelope[PutResult]:
    """Receive the bytes of a reserved upload; the URL's token is the credential.

    The URL is claimed before a byte is read, so only one PUT of it runs at a time (a second
    one gets 409), and the bytes stream to a scratch file.
    """
    hub: Hub = request.app.state.hub
    pending, claim = await run_in_threadpool(push.claim_for_put, hub.engine, upload_id, token)
    try:
        limit = min(hub.settings.max_upload_bytes, pending.size or hub.settings.max_upload_bytes)
        sha = hashlib.sha256()
        received = 0
        handle = hub.store.scratch_file()
        path = Path(handle.name)
        try:
            renewed_at = time.monotonic()
            with handle:
                async for chunk in request.stream():
                    if time.monotonic() - renewed_at > push.RENEW_EVERY_SECONDS:
                        claim = await run_in_threadpool(
                            push.renew_put, hub.engine, upload_id, claim
                        )
                        renewed_at = time.monotonic()
                    received += len(chunk)
                    if received > limit:
                        raise TooLarge(
                            f"The upload is larger than announced or allowed ({limit} bytes)."
                        )
                    sha.update(chunk)
                    handle.write(chunk)
            if not hmac.compare_digest(sha.hexdigest(), pending.sha256):
                raise BadRequest(
                    f"The uploaded bytes have sha256 {sha.hexdigest()}, not the announced "
                    f"{pending.sha256}; upload the same file you announced."
                )
            await run_in_threadpool(hub.store.put_file, path, pending.staging_key)
        finally:
            path.unlink(missing_ok=True)
    finally:
        await run_in_threadpool(push.release_put, hub.engine, upload_id, claim)
    return Envelope(data=PutResult(sha256=sha.hexdigest(), size=received))


def _finalize(
    hub: Hub, base: str, session: SessionDep, principal: AuthDep, env_id: str, upload_id: str,
    kind: FileKind,
) -> Envelope[FinalizeResult]:  # fmt: skip
    return Envelope(
        data=push.finalize(
            session, hub.engine, hub.store, hub.settings, principal, env_id, upload_id, kind, base
        )
    )


@router.post("/{env_id}/wheels/{wheel_id}/finalize", response_model=Envelope[FinalizeResult])
def finalize_wheel(
    env_id: str, wheel_id: str, hub: HubDep, base: BaseUrlDep, session: SessionDep,
    principal: AuthDep,
) -> Envelope[FinalizeResult]:  # fmt: skip
    return _finalize(hub, base, session, principal, env_id, wheel_id, FileKind.WHEEL)


@router.post("/{env_id}/versions/{version_id}/finalize", response_model=Envelope[FinalizeResult])
@router.post(
    "/{env_id}/sources/{version_id}/finalize",
    response_model=Envelope[FinalizeResult],
    include_in_schema=False,
)
def finalize_source(
    env_id: str, version_id: str, hub: HubDep, base: BaseUrlDep, session: SessionDep,
    principal: AuthDep,
) -> Envelope[FinalizeResult]:  # fmt: skip
    return _finalize(hub, base, session, principal, env_id, version_id, FileKind.SOURCE)
