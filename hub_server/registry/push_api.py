"""The `prime env push` protocol: resolve (get-or-create), reserve → PUT → finalize.

Reservation checks everything that can be checked from the announcement (name, version,
content hash, filename reuse) so the client learns early; finalize validates the real bytes
exactly like the twine endpoint and only then stores anything.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from datetime import datetime, timedelta
from pathlib import Path

import sqlalchemy as sa
from fastapi import APIRouter, Request
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select
from starlette.concurrency import run_in_threadpool

from hub_server.accounts.access import find_owner, require_upload, writable_environment_by_id
from hub_server.accounts.models import Owner
from hub_server.core.blobstore import staging_key
from hub_server.core.errors import BadRequest, Conflict, FileExists, NotFound, TooLarge
from hub_server.core.ids import utcnow
from hub_server.http.deps import AuthDep, HubDep, SessionDep, check_upload_rate
from hub_server.http.state import Hub
from hub_server.registry.models import DistFile, Environment, PendingUpload, Version
from hub_server.registry.pending_uploads import check_quota
from hub_server.registry.publishing import EnvTarget, NewFile, create_environment, publish_file
from hub_server.registry.views import version_infos
from registry_index.errors import InvalidUpload
from registry_index.filenames import parse_filename
from registry_index.names import normalize, validate_project_name
from registry_index.schemas.envelope import Envelope
from registry_index.schemas.environments import OwnerOut, Visibility
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
from registry_index.validation import UploadLimits, validate_distribution, validate_source_archive

router = APIRouter(prefix="/api/v1/environmentshub", tags=["push"])

# A PUT holds its URL by renewing a short lease while bytes arrive; one that died without
# releasing it (worker killed, hub restarted) frees the URL once the lease lapses, so the
# client's retry after a restart can go through within a minute.
_RECEIVE_LEASE = timedelta(seconds=60)
_RENEW_EVERY_SECONDS = 15.0


def public_base(request: Request, hub: Hub) -> str:
    """The hub's external base URL (setting, else what the client used)."""
    return (hub.settings.public_url or str(request.base_url)).rstrip("/")


def _limits(hub: Hub) -> UploadLimits:
    return UploadLimits(max_file_size=hub.settings.max_upload_bytes)


# -- resolve ------------------------------------------------------------------------------


@router.post("/resolve", response_model=Envelope[ResolveResponse])
def resolve(
    body: ResolveRequest, principal: AuthDep, session: SessionDep
) -> Envelope[ResolveResponse]:
    """Get or create `owner/name` (owner: owner_slug, team_slug, else the caller)."""
    try:
        validate_project_name(body.name)
    except InvalidUpload as exc:
        raise BadRequest(str(exc)) from None
    owner_name = body.owner_slug or body.team_slug or principal.user.username
    owner = find_owner(session, owner_name)
    if owner is None:
        raise NotFound(f"No user or organisation named {owner_name!r} on this hub.")
    normalized = normalize(body.name)
    env = _env_by_name(session, owner, normalized)
    require_upload(principal, owner, env, normalized)
    created = False
    if env is None:
        try:
            env = create_environment(
                session, owner, body.name, visibility=body.visibility or Visibility.PUBLIC,
                description=body.description or "", tags=body.tags,
            )  # fmt: skip
            session.commit()
            created = True
        except IntegrityError:
            session.rollback()
            env = _env_by_name(session, owner, normalized)
            assert env is not None
    return Envelope(
        data=ResolveResponse(
            id=env.id,
            owner=OwnerOut(name=owner.name, kind=owner.kind),  # type: ignore[arg-type]
            name=env.name,
            visibility=env.visibility,  # type: ignore[arg-type]
            created=created,
        )
    )


def _env_by_name(session: Session, owner: Owner, normalized: str) -> Environment | None:
    return session.exec(
        select(Environment).where(
            Environment.owner_id == owner.id, Environment.normalized_name == normalized
        )
    ).first()


# -- reserve ------------------------------------------------------------------------------


def _check_announcement(
    session: Session, hub: Hub, env: Environment, owner: Owner, body: UploadRequest, kind: FileKind
) -> None:
    if body.size is not None and body.size > hub.settings.max_upload_bytes:
        raise TooLarge(
            f"{body.filename!r} is {body.size} bytes, over this hub's "
            f"{hub.settings.max_upload_bytes} byte limit."
        )
    if "+" in body.semantic_version:
        raise BadRequest(
            f"Version {body.semantic_version!r} has a local part ('+...'); the hub does not "
            "accept local versions. Use a plain version such as 1.2.0."
        )
    if kind == FileKind.WHEEL:
        try:
            parsed = parse_filename(body.filename)
        except InvalidUpload as exc:
            raise BadRequest(str(exc)) from None
        if parsed.kind != FileKind.WHEEL or parsed.name != env.normalized_name:
            raise BadRequest(
                f"{body.filename!r} is not a wheel of {owner.name}/{env.name}; build the "
                "environment's own wheel (prime env build)."
            )
        if str(parsed.version) != _canonical_text(body.semantic_version):
            raise BadRequest(
                f"{body.filename!r} is version {parsed.version}, but semantic_version says "
                f"{body.semantic_version!r}."
            )
    if body.content_hash:
        same = session.exec(
            select(Version, DistFile)
            .join(DistFile, DistFile.version_id == Version.id)  # type: ignore[arg-type]
            .where(
                Version.environment_id == env.id,
                Version.content_hash == body.content_hash,
                DistFile.kind == kind,
            )
        ).first()
        if same is not None:
            raise Conflict(
                f"Environment {owner.name}/{env.name} version {same[0].version} already exists "
                f"with the same content (content hash {body.content_hash[:12]}…); change the "
                "environment's files before pushing again."
            )
    taken = session.exec(
        select(DistFile).where(
            DistFile.environment_id == env.id, DistFile.filename == body.filename
        )
    ).first()
    if taken is not None:
        if taken.sha256 != body.sha256:
            raise FileExists(body.filename, taken.sha256)
        return  # the same file is already stored: finalize will be a no-op


def _canonical_text(version: str) -> str:
    from packaging.version import InvalidVersion
    from packaging.version import Version as PkgVersion

    try:
        return str(PkgVersion(version))
    except InvalidVersion:
        raise BadRequest(f"{version!r} is not a valid PEP 440 version.") from None


def _reserve(
    request: Request, hub: Hub, session: SessionDep, principal: AuthDep, env_id: str,
    body: UploadRequest, kind: FileKind,
) -> tuple[PendingUpload, str]:  # fmt: skip
    owner, env = writable_environment_by_id(session, principal, env_id)
    check_upload_rate(request, hub, principal)
    check_quota(session, hub.settings, principal.user.id, body.size)
    _canonical_text(body.semantic_version)
    _check_announcement(session, hub, env, owner, body, kind)
    _apply_metadata(session, env, body)
    secret = secrets.token_urlsafe(32)
    pending = PendingUpload(
        environment_id=env.id,
        kind=kind,
        filename=body.filename,
        sha256=body.sha256,
        size=body.size,
        semantic_version=body.semantic_version,
        content_hash=body.content_hash,
        secret_hash=hashlib.sha256(secret.encode()).hexdigest(),
        staging_key="",
        user_id=principal.user.id,
        expires_at=utcnow() + timedelta(seconds=hub.settings.upload_url_ttl_seconds),
    )
    pending.staging_key = staging_key(pending.id)
    session.add(pending)
    session.commit()
    if hub.store.is_local:
        url = f"{public_base(request, hub)}/api/v1/environmentshub/uploads/{pending.id}?token={secret}"
    else:
        url = hub.store.presign_put(pending.staging_key, hub.settings.upload_url_ttl_seconds)
    return pending, url


def _apply_metadata(session: Session, env: Environment, body: UploadRequest) -> None:
    """A push carries the description and tags from pyproject; keep the environment current."""
    from hub_server.registry.models import EnvironmentTag

    if body.metadata.description is not None:
        env.description = body.metadata.description
        session.add(env)
    if body.metadata.reward_range is not None:
        env.reward_min, env.reward_max = body.metadata.reward_range
        session.add(env)
    if body.metadata.tags is not None:
        for row in session.exec(
            select(EnvironmentTag).where(EnvironmentTag.environment_id == env.id)
        ):
            session.delete(row)
        session.flush()
        for tag in sorted(set(body.metadata.tags)):
            session.add(EnvironmentTag(environment_id=env.id, tag=tag))


@router.post("/{env_id}/wheels", response_model=Envelope[WheelReservation])
def reserve_wheel(
    env_id: str, body: UploadRequest, request: Request, hub: HubDep, session: SessionDep,
    principal: AuthDep,
) -> Envelope[WheelReservation]:  # fmt: skip
    pending, url = _reserve(request, hub, session, principal, env_id, body, FileKind.WHEEL)
    return Envelope(
        data=WheelReservation(wheel_id=pending.id, upload_url=url, expires_at=pending.expires_at)
    )


@router.post("/{env_id}/versions", response_model=Envelope[SourceReservation])
@router.post(
    "/{env_id}/sources", response_model=Envelope[SourceReservation], include_in_schema=False
)
def reserve_source(
    env_id: str, body: UploadRequest, request: Request, hub: HubDep, session: SessionDep,
    principal: AuthDep,
) -> Envelope[SourceReservation]:  # fmt: skip
    pending, url = _reserve(request, hub, session, principal, env_id, body, FileKind.SOURCE)
    return Envelope(
        data=SourceReservation(version_id=pending.id, upload_url=url, expires_at=pending.expires_at)
    )


# -- PUT the bytes (local store) ------------------------------------------------------------


@router.put("/uploads/{upload_id}", response_model=Envelope[PutResult])
async def put_bytes(upload_id: str, token: str, request: Request) -> Envelope[PutResult]:
    """Receive the bytes of a reserved upload; the URL's token is the credential.

    The URL is checked and claimed before a byte is read, so only one PUT of it runs at a
    time (a second one gets 409), and the bytes stream to a scratch file: memory stays flat.
    """
    hub: Hub = request.app.state.hub
    pending, claim = await run_in_threadpool(_claim_for_put, hub, upload_id, token)
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
                    if time.monotonic() - renewed_at > _RENEW_EVERY_SECONDS:
                        claim = await run_in_threadpool(_renew_put, hub, upload_id, claim)
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
        await run_in_threadpool(_release_put, hub, upload_id, claim)
    return Envelope(data=PutResult(sha256=sha.hexdigest(), size=received))


def _claim_for_put(hub: Hub, upload_id: str, token: str) -> tuple[PendingUpload, datetime]:
    """The reservation behind this URL, claimed for one PUT (404 unknown, 409 busy), and the
    claim's timestamp, which only this PUT may renew or release."""
    with Session(hub.engine, expire_on_commit=False) as session:
        pending = session.get(PendingUpload, upload_id)
        digest = hashlib.sha256(token.encode()).hexdigest()
        if (
            pending is None
            or not hmac.compare_digest(pending.secret_hash, digest)
            or _expired(pending)
        ):
            raise NotFound("This upload URL is unknown or expired; reserve the upload again.")
        now = utcnow()
        claimed = session.execute(
            sa.update(PendingUpload)
            .where(
                col(PendingUpload.id) == upload_id,
                sa.or_(
                    col(PendingUpload.receiving_since).is_(None),
                    col(PendingUpload.receiving_since) < now - _RECEIVE_LEASE,
                ),
            )
            .values(receiving_since=now)
        )
        session.commit()
        if claimed.rowcount == 0:  # type: ignore[attr-defined]
            raise Conflict(
                "This upload URL is already receiving an upload; wait for that PUT to finish "
                "(one upload per URL at a time)."
            )
        return pending, now


def _renew_put(hub: Hub, upload_id: str, claim: datetime) -> datetime:
    """Extend this PUT's claim; 409 when its lease lapsed and another PUT took the URL."""
    now = utcnow()
    with Session(hub.engine) as session:
        renewed = session.execute(
            sa.update(PendingUpload)
            .where(col(PendingUpload.id) == upload_id, col(PendingUpload.receiving_since) == claim)
            .values(receiving_since=now)
        )
        session.commit()
    if renewed.rowcount == 0:  # type: ignore[attr-defined]
        raise Conflict("This upload stalled and another upload of the URL took over; retry.")
    return now


def _release_put(hub: Hub, upload_id: str, claim: datetime) -> None:
    """Free the URL, unless another PUT took it over after this one's lease lapsed."""
    with Session(hub.engine) as session:
        session.execute(
            sa.update(PendingUpload)
            .where(col(PendingUpload.id) == upload_id, col(PendingUpload.receiving_since) == claim)
            .values(receiving_since=None)
        )
        session.commit()


def _expired(pending: PendingUpload) -> bool:
    return pending.expires_at < utcnow()


# -- finalize -------------------------------------------------------------------------------


def _finalize(
    request: Request, hub: Hub, session: Session, principal: AuthDep, env_id: str,
    upload_id: str, kind: FileKind,
) -> Envelope[FinalizeResult]:  # fmt: skip
    owner, env = writable_environment_by_id(session, principal, env_id)
    pending = session.get(PendingUpload, upload_id)
    if (
        pending is None
        or pending.environment_id != env.id
        or pending.kind != kind
        or _expired(pending)
    ):
        raise NotFound(f"No pending upload {upload_id!r} for this environment; reserve it again.")
    if not hub.store.exists(pending.staging_key):
        raise BadRequest("Nothing was uploaded yet: PUT the file to upload_url, then finalize.")
    scratch = hub.store.fetch_to_scratch(pending.staging_key)
    try:
        new = _validated_file(hub, env, pending, scratch, kind)
        target = EnvTarget(owner=owner, name=env.name, environment_id=env.id)
        publish_file(hub.engine, hub.store, target, new, scratch, principal.user.id)
    finally:
        scratch.unlink(missing_ok=True)
        hub.store.delete(pending.staging_key)
        session.delete(pending)
        session.commit()
    version = next(
        v for v in version_infos(session, public_base(request, hub), owner, env)
        if _canonical_text(v.semantic_version) == _canonical_text(pending.semantic_version)
    )  # fmt: skip
    return Envelope(data=FinalizeResult(success=True, version=version))


def _validated_file(
    hub: Hub, env: Environment, pending: PendingUpload, scratch: Path, kind: FileKind
) -> NewFile:
    sha256 = hashlib.sha256(scratch.read_bytes()).hexdigest()
    if sha256 != pending.sha256:
        raise BadRequest("The uploaded bytes do not match the announced sha256; push again.")
    try:
        if kind == FileKind.SOURCE:
            validate_source_archive(scratch, pending.filename, _limits(hub))
            return NewFile(
                filename=pending.filename, kind=FileKind.SOURCE, sha256=sha256,
                size=scratch.stat().st_size, version=pending.semantic_version,
                content_hash=pending.content_hash,
            )  # fmt: skip
        validated = validate_distribution(scratch, pending.filename, _limits(hub))
    except InvalidUpload as exc:
        raise BadRequest(str(exc)) from None
    metadata = validated.metadata
    if validated.filename.name != env.normalized_name:
        raise BadRequest(f"{pending.filename!r} is not a wheel of {env.name}.")
    return NewFile(
        filename=pending.filename,
        kind=FileKind.WHEEL,
        sha256=sha256,
        size=validated.size,
        version=str(metadata.version),
        requires_python=metadata.requires_python,
        requires_dist=tuple(metadata.requires_dist),
        summary=metadata.summary or "",
        metadata_raw=metadata.raw,
        metadata_sha256=validated.metadata_sha256,
        content_hash=pending.content_hash,
        keywords=tuple(metadata.keywords),
    )


@router.post("/{env_id}/wheels/{wheel_id}/finalize", response_model=Envelope[FinalizeResult])
def finalize_wheel(
    env_id: str, wheel_id: str, request: Request, hub: HubDep, session: SessionDep,
    principal: AuthDep,
) -> Envelope[FinalizeResult]:  # fmt: skip
    return _finalize(request, hub, session, principal, env_id, wheel_id, FileKind.WHEEL)


@router.post("/{env_id}/versions/{version_id}/finalize", response_model=Envelope[FinalizeResult])
@router.post(
    "/{env_id}/sources/{version_id}/finalize",
    response_model=Envelope[FinalizeResult],
    include_in_schema=False,
)
def finalize_source(
    env_id: str, version_id: str, request: Request, hub: HubDep, session: SessionDep,
    principal: AuthDep,
) -> Envelope[FinalizeResult]:  # fmt: skip
    return _finalize(request, hub, session, principal, env_id, version_id, FileKind.SOURCE)
