"""The `prime env push` protocol: resolve (get-or-create), reserve → PUT → finalize.

Reservation checks everything that can be checked from the announcement (name, version,
content hash, filename reuse) so the client learns early; finalize validates the real bytes
exactly like the twine endpoint and only then stores anything. A PUT of the bytes holds its
URL by renewing a short lease while they arrive (`claim_for_put`), so only one PUT of a URL
runs at a time.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, cast

import sqlalchemy as sa
from packaging.version import InvalidVersion
from packaging.version import Version as PkgVersion
from sqlalchemy.engine import CursorResult, Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from hub_server.accounts.auth import Principal
from hub_server.accounts.models import Owner
from hub_server.accounts.service import find_owner
from hub_server.core.blobstore import BlobStorage, staging_key
from hub_server.core.errors import BadRequest, Conflict, FileExists, NotFound, TooLarge
from hub_server.core.ids import utcnow
from hub_server.core.settings import HubSettings
from hub_server.registry.access import require_upload, writable_environment_by_id
from hub_server.registry.models import DistFile, Environment, PendingUpload, Version
from hub_server.registry.pending_uploads import check_quota
from hub_server.registry.publishing import (
    EnvTarget,
    NewFile,
    check_release_slot,
    create_environment,
    publish_file,
)
from hub_server.registry.service import set_tags
from hub_server.registry.views import version_infos
from registry_index.errors import InvalidUpload
from registry_index.filenames import parse_filename
from registry_index.names import normalize, validate_project_name
from registry_index.schemas.environments import OwnerOut, Visibility
from registry_index.schemas.push import (
    FinalizeResult,
    ResolveRequest,
    ResolveResponse,
    UploadRequest,
)
from registry_index.schemas.versions import FileKind
from registry_index.validation import UploadLimits, validate_distribution, validate_source_archive

# A PUT that died without releasing its URL (worker killed, hub restarted) frees it once the
# lease lapses, so the client's retry after a restart can go through within a minute.
RECEIVE_LEASE = timedelta(seconds=60)
RENEW_EVERY_SECONDS = 15.0


def _limits(settings: HubSettings) -> UploadLimits:
    return UploadLimits(max_file_size=settings.max_upload_bytes)


def _rowcount(result: Any) -> int:
    """Rows an UPDATE matched (`Session.execute` types its answer as a plain Result)."""
    return int(cast(CursorResult[Any], result).rowcount)


# -- resolve ------------------------------------------------------------------------------


def resolve(session: Session, principal: Principal, body: ResolveRequest) -> ResolveResponse:
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
    return ResolveResponse(
        id=env.id,
        owner=OwnerOut(name=owner.name, kind=owner.kind),
        name=env.name,
        visibility=env.visibility,
        created=created,
    )


def _env_by_name(session: Session, owner: Owner, normalized: str) -> Environment | None:
    return session.exec(
        select(Environment).where(
            Environment.owner_id == owner.id, Environment.normalized_name == normalized
        )
    ).first()


# -- reserve ------------------------------------------------------------------------------


def writable_environment(session: Session, principal: Principal, env_id: str) -> Environment:
    """The environment a reservation or finalize names, if the caller may publish to it."""
    return writable_environment_by_id(session, principal, env_id)[1]


def _check_announcement(
    session: Session, settings: HubSettings, env: Environment, body: UploadRequest,
    kind: FileKind,
) -> None:  # fmt: skip
    owner = env.owner
    if body.size is not None and body.size > settings.max_upload_bytes:
        raise TooLarge(
            f"{body.filename!r} is {body.size} bytes, over this hub's "
            f"{settings.max_upload_bytes} byte limit."
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
        if str(parsed.version) != canonical_text(body.semantic_version):
            raise BadRequest(
                f"{body.filename!r} is version {parsed.version}, but semantic_version says "
                f"{body.semantic_version!r}."
            )
    if body.content_hash:
        same = session.exec(
            select(Version, DistFile)
            .join(DistFile, col(DistFile.version_id) == col(Version.id))
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
    if taken is not None and taken.sha256 != body.sha256:
        raise FileExists(body.filename, taken.sha256)
    # The same file already stored: finalize will be a no-op. Another file in its release's
    # place is refused now, before the bytes are sent (and again when they are published).
    check_release_slot(session.connection(), env.id, body.semantic_version, kind, body.filename)


def canonical_text(version: str) -> str:
    """`version` in its PEP 440 normal form (400 when it is not a version)."""
    try:
        return str(PkgVersion(version))
    except InvalidVersion:
        raise BadRequest(f"{version!r} is not a valid PEP 440 version.") from None


def reserve(
    session: Session, settings: HubSettings, principal: Principal, env: Environment,
    body: UploadRequest, kind: FileKind,
) -> tuple[PendingUpload, str]:  # fmt: skip
    """Check the announcement and reserve the upload; returns it and its one-time secret."""
    check_quota(session, settings, principal.user.id, body.size)
    canonical_text(body.semantic_version)
    _check_announcement(session, settings, env, body, kind)
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
        rubric_json=body.metadata.rubric.model_dump_json() if body.metadata.rubric else None,
        secret_hash=hashlib.sha256(secret.encode()).hexdigest(),
        staging_key="",
        user_id=principal.user.id,
        expires_at=utcnow() + timedelta(seconds=settings.upload_url_ttl_seconds),
    )
    pending.staging_key = staging_key(pending.id)
    session.add(pending)
    session.commit()
    return pending, secret


def upload_url(
    store: BlobStorage, settings: HubSettings, base_url: str, pending: PendingUpload, secret: str
) -> str:
    """Where the client PUTs the bytes: this hub (local store) or a presigned S3 URL."""
    if store.is_local:
        return f"{base_url}/api/v1/environmentshub/uploads/{pending.id}?token={secret}"
    return store.presign_put(pending.staging_key, settings.upload_url_ttl_seconds)


def _apply_metadata(session: Session, env: Environment, body: UploadRequest) -> None:
    """A push carries the description and tags from pyproject; keep the environment current."""
    if body.metadata.description is not None:
        env.description = body.metadata.description
        session.add(env)
    if body.metadata.reward_range is not None:
        env.reward_min, env.reward_max = body.metadata.reward_range
        session.add(env)
    if body.metadata.tags is not None:
        set_tags(session, env, body.metadata.tags)


# -- PUT the bytes (local store) ------------------------------------------------------------


def claim_for_put(engine: Engine, upload_id: str, token: str) -> tuple[PendingUpload, datetime]:
    """The reservation behind this URL, claimed for one PUT (404 unknown, 409 busy), and the
    claim's timestamp, which only this PUT may renew or release."""
    with Session(engine, expire_on_commit=False) as session:
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
                    col(PendingUpload.receiving_since) < now - RECEIVE_LEASE,
                ),
            )
            .values(receiving_since=now)
        )
        session.commit()
        if _rowcount(claimed) == 0:
            raise Conflict(
                "This upload URL is already receiving an upload; wait for that PUT to finish "
                "(one upload per URL at a time)."
            )
        return pending, now


def renew_put(engine: Engine, upload_id: str, claim: datetime) -> datetime:
    """Extend this PUT's claim; 409 when its lease lapsed and another PUT took the URL."""
    now = utcnow()
    with Session(engine) as session:
        renewed = session.execute(
            sa.update(PendingUpload)
            .where(col(PendingUpload.id) == upload_id, col(PendingUpload.receiving_since) == claim)
            .values(receiving_since=now)
        )
        session.commit()
    if _rowcount(renewed) == 0:
        raise Conflict("This upload stalled and another upload of the URL took over; retry.")
    return now


def release_put(engine: Engine, upload_id: str, claim: datetime) -> None:
    """Free the URL, unless another PUT took it over after this one's lease lapsed."""
    with Session(engine) as session:
        session.execute(
            sa.update(PendingUpload)
            .where(col(PendingUpload.id) == upload_id, col(PendingUpload.receiving_since) == claim)
            .values(receiving_since=None)
        )
        session.commit()


def _expired(pending: PendingUpload) -> bool:
    return pending.expires_at < utcnow()


# -- finalize -------------------------------------------------------------------------------


def finalize(
    session: Session, engine: Engine, store: BlobStorage, settings: HubSettings,
    principal: Principal, env_id: str, upload_id: str, kind: FileKind, base_url: str,
) -> FinalizeResult:  # fmt: skip
    """Validate the staged bytes like the twine endpoint does, then publish them."""
    owner, env = writable_environment_by_id(session, principal, env_id)
    pending = session.get(PendingUpload, upload_id)
    if (
        pending is None
        or pending.environment_id != env.id
        or pending.kind != kind
        or _expired(pending)
    ):
        raise NotFound(f"No pending upload {upload_id!r} for this environment; reserve it again.")
    if not store.exists(pending.staging_key):
        raise BadRequest("Nothing was uploaded yet: PUT the file to upload_url, then finalize.")
    scratch = store.fetch_to_scratch(pending.staging_key)
    try:
        new = _validated_file(settings, env, pending, scratch, kind)
        target = EnvTarget(owner=owner, name=env.name, environment_id=env.id)
        # The reads are done: the request's connection goes back to the pool before the
        # upload's transaction takes one (a request never holds two).
        session.commit()
        publish_file(engine, store, target, new, scratch, principal.user.id)
    finally:
        scratch.unlink(missing_ok=True)
        store.delete(pending.staging_key)
        session.delete(pending)
        session.commit()
    version = next(
        v for v in version_infos(session, base_url, owner, env)
        if canonical_text(v.semantic_version) == canonical_text(pending.semantic_version)
    )  # fmt: skip
    return FinalizeResult(success=True, version=version)


def _validated_file(
    settings: HubSettings, env: Environment, pending: PendingUpload, scratch: Path,
    kind: FileKind,
) -> NewFile:  # fmt: skip
    sha256 = hashlib.sha256(scratch.read_bytes()).hexdigest()
    if sha256 != pending.sha256:
        raise BadRequest("The uploaded bytes do not match the announced sha256; push again.")
    try:
        if kind == FileKind.SOURCE:
            validate_source_archive(scratch, pending.filename, _limits(settings))
            return NewFile(
                filename=pending.filename, kind=FileKind.SOURCE, sha256=sha256,
                size=scratch.stat().st_size, version=pending.semantic_version,
                content_hash=pending.content_hash, rubric_json=pending.rubric_json,
            )  # fmt: skip
        validated = validate_distribution(scratch, pending.filename, _limits(settings))
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
        rubric_json=pending.rubric_json,
    )
