"""The twine / `uv publish` upload endpoint (`POST /legacy/`, PyPI's "legacy" API).

Errors are plain text with the message also in the HTTP reason phrase, because that is all
twine prints. An identical re-upload answers 200 so a re-run of `twine upload` succeeds.
Nothing is written before the file has passed validation, and the scratch copy is always
removed.
"""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path
from typing import IO

import sqlalchemy as sa
from fastapi import APIRouter, Request, Response
from fastapi.responses import PlainTextResponse
from sqlmodel import Session
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

from hub_server.accounts.access import find_owner, require_upload
from hub_server.accounts.auth import Principal
from hub_server.accounts.models import Owner
from hub_server.core.errors import (
    BadRequest,
    Forbidden,
    HubError,
    NotFound,
    TooLarge,
    Unauthorized,
)
from hub_server.core.http_protocol import REASON_HEADER, latin1_reason
from hub_server.http.deps import check_upload_rate
from hub_server.http.principal import AUTH_DEFERRED_KEY, PRINCIPAL_KEY, resolve_principal
from hub_server.http.state import Hub
from hub_server.registry.models import Environment
from hub_server.registry.publishing import EnvTarget, NewFile, publish_file
from registry_index.errors import InvalidUpload
from registry_index.filenames import parse_filename
from registry_index.names import normalize
from registry_index.schemas.versions import FileKind
from registry_index.validation import UploadLimits, validate_distribution

router = APIRouter(tags=["upload"])

_CHUNK = 1024 * 1024
_FILETYPES = {"bdist_wheel": FileKind.WHEEL, "sdist": FileKind.SDIST}
# The upload's project, looked up before the body is spooled: built once (composing the
# statement on every upload cost more than running it), and read as a plain row (a new
# project, the usual case, then needs no ORM machinery at all).
_ENVIRONMENTS = Environment.__table__  # type: ignore[attr-defined]
_ENVIRONMENT = sa.select(_ENVIRONMENTS).where(
    _ENVIRONMENTS.c.owner_id == sa.bindparam("owner_id"),
    _ENVIRONMENTS.c.normalized_name == sa.bindparam("normalized"),
)


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
        _check_token(request, hub, principal)
        # An owner the token's user belongs to came with the principal; only another one (an
        # admin's upload, or a refusal to come) is looked up.
        name = _target_owner_name(principal, owner_name)
        owner = principal.owners.get(name.lower())
        if owner is None:
            owner = await run_in_threadpool(_find_target_owner, hub, name)
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
    _check_token(request, hub, principal)
    name = _target_owner_name(principal, owner_name)
    owner = principal.owners.get(name.lower()) or _find_target_owner(hub, name)
    _admit(request, hub, principal, owner)
    return principal, owner


def _admitted_and_handled(
    request: Request, hub: Hub, owner_name: str | None, form: object
) -> Response:
    principal, owner = _admitted(request, hub, owner_name)
    return _handle(hub, principal, owner, form)


def _check_token(request: Request, hub: Hub, principal: Principal) -> None:
    """403 for a read-only token, 413 for a declared body over the limit."""
    if not principal.may_write_anything():
        raise Forbidden(
            "This token is read-only; upload with a token of scope 'all' or "
            "'upload:OWNER[/NAME]' (`prime hub token create --scope upload:OWNER`)."
        )
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > hub.settings.max_upload_bytes + _CHUNK:
        raise _too_large(hub)


def _admit(request: Request, hub: Hub, principal: Principal, owner: Owner) -> None:
    """403 when the token can write nothing of `owner`; 429 past the upload rate."""
    _check_owner(principal, owner)
    check_upload_rate(request, hub, principal)


def _authenticate(request: Request, hub: Hub) -> Principal:
    with Session(hub.engine, expire_on_commit=False) as session:
        principal = resolve_principal(request, hub, session)
    if principal is None:
        raise Unauthorized(
            "Uploading needs an API token: use username __token__ and your token as the password."
        )
    return principal


def _target_owner_name(principal: Principal, owner_name: str | None) -> str:
    """The owner named in the URL, else the token's single upload owner, else the user."""
    if owner_name is not None:
        return owner_name
    named = principal.upload_owner_names()
    return named[0] if len(named) == 1 else principal.user.username


def _find_target_owner(hub: Hub, name: str) -> Owner:
    with Session(hub.engine, expire_on_commit=False) as session:
        owner = find_owner(session, name)
    if owner is None:
        raise NotFound(f"No owner named {name!r} on this hub.")
    return owner


def _check_owner(principal: Principal, owner: Owner) -> None:
    """403 before the body is read when the token can write nothing of the target owner."""
    if not principal.may_write_some_of(owner):
        raise Forbidden(
            f"Your token may not publish to {owner.name}/; ask an admin for a token with scope "
            f"upload:{owner.name} (and membership of {owner.name})."
        )


def _too_large(hub: Hub) -> TooLarge:
    limit = hub.settings.max_upload_bytes / (1024 * 1024)
    return TooLarge(f"The upload is larger than this hub's {limit:.0f} MiB limit per file.")


def _field(form: object, name: str) -> str:
    value = form.get(name)  # type: ignore[attr-defined]
    return value.strip() if isinstance(value, str) else ""


def _handle(hub: Hub, principal: Principal, owner: Owner, form: object) -> Response:
    action = _field(form, ":action")
    if action != "file_upload":
        raise BadRequest(f"Unsupported ':action' {action!r}; only 'file_upload' is supported.")
    if _field(form, "protocol_version") != "1":
        raise BadRequest("Unknown protocol_version; upload with twine or `uv publish`.")
    content = form.get("content")  # type: ignore[attr-defined]
    if not isinstance(content, UploadFile) or not content.filename:
        raise BadRequest("Upload a file in the 'content' field (twine and uv publish do this).")
    filetype = _FILETYPES.get(_field(form, "filetype"))
    if filetype is None:
        raise BadRequest("Unknown filetype; upload a wheel (bdist_wheel) or an sdist (sdist).")
    filename = content.filename
    try:
        parsed = parse_filename(filename)
    except InvalidUpload as exc:
        raise BadRequest(str(exc)) from None
    if parsed.kind != filetype:
        raise BadRequest(f"{filename!r} is not a {_field(form, 'filetype')} file.")
    form_name, form_version = _field(form, "name"), _field(form, "version")
    if form_name and normalize(form_name) != parsed.name:
        raise BadRequest(
            f"The form says project {form_name!r} but the file is {filename!r}; upload the file "
            "that belongs to this project."
        )
    if (
        form_version
        and form_version != str(parsed.version)
        and _safe_version(form_version) != parsed.version
    ):
        raise BadRequest(f"The form says version {form_version!r} but the file is {filename!r}.")
    digests = {
        algo: _field(form, field).lower()
        for algo, field in (
            ("sha256", "sha256_digest"),
            ("blake2b", "blake2_256_digest"),
            ("md5", "md5_digest"),
        )
        if _field(form, field)
    }
    if not digests:
        raise BadRequest(
            "Include at least one message digest (sha256_digest or blake2_256_digest)."
        )

    with hub.engine.connect() as connection:
        found = connection.execute(
            _ENVIRONMENT, {"owner_id": owner.id, "normalized": parsed.name}
        ).first()
    env = None if found is None else Environment(**found._mapping)
    require_upload(principal, owner, env, parsed.name)  # 404 for one the caller cannot read

    upload = _spool(hub, content.file, digests)
    try:
        try:
            validated = validate_distribution(
                upload, filename, UploadLimits(max_file_size=hub.settings.max_upload_bytes)
            )
        except InvalidUpload as exc:
            raise BadRequest(str(exc)) from None
        metadata = validated.metadata
        new = NewFile(
            filename=filename,
            kind=filetype,
            sha256=validated.sha256,
            size=validated.size,
            version=str(metadata.version),
            requires_python=metadata.requires_python,
            requires_dist=tuple(metadata.requires_dist),
            summary=metadata.summary or "",
            metadata_raw=metadata.raw if validated.metadata_sha256 else None,
            metadata_sha256=validated.metadata_sha256,
            keywords=tuple(metadata.keywords),
        )
        target = EnvTarget(
            owner=owner,
            name=metadata.name,
            environment_id=env.id if env else None,
            absent=env is None,
        )
        result = publish_file(hub.engine, hub.store, target, new, upload, principal.user.id)
    finally:
        if isinstance(upload, Path):
            upload.unlink(missing_ok=True)
    message = "OK" if result.created else f"{filename} was already uploaded with the same content."
    return PlainTextResponse(message + "\n")


def _safe_version(text: str) -> object:
    from packaging.version import InvalidVersion, Version

    try:
        return Version(text)
    except InvalidVersion:
        return None


def _spool(hub: Hub, stream: IO[bytes], digests: dict[str, str]) -> Path | bytes:
    """The upload, within the size limit and matching the digests the client sent.

    One that fits in a chunk (most wheels) stays in memory: it is validated there and written
    once, straight to its blob, by the blob writer (a scratch file first cost a file creation
    and two more opens on the request's own thread). A larger one goes to a scratch file on
    the store's filesystem, which becomes its blob by a rename.
    """
    hashers = {algo: _hasher(algo) for algo in digests}
    stream.seek(0)
    first = stream.read(_CHUNK)
    upload = first if len(first) < _CHUNK else _scratch_copy(hub, first, stream, hashers)
    if isinstance(upload, bytes):
        if len(upload) > hub.settings.max_upload_bytes:
            raise _too_large(hub)
        for hasher in hashers.values():
            hasher.update(upload)
    for algo, expected in digests.items():
        # As bytes: compare_digest raises TypeError for a str with non-ASCII characters (any
        # form value may carry them), which was a 500 that left the scratch file behind.
        if not hmac.compare_digest(hashers[algo].hexdigest().encode(), expected.encode()):
            if isinstance(upload, Path):
                upload.unlink(missing_ok=True)
            raise BadRequest(
                f"The {algo} digest supplied does not match a digest calculated from the "
                "uploaded file; the upload was corrupted, try again."
            )
    return upload


def _scratch_copy(
    hub: Hub, first: bytes, stream: IO[bytes], hashers: dict[str, hashlib._Hash]
) -> Path:
    """Copy the upload (`first` chunk, then the rest of `stream`) to a scratch file, hashing it
    and enforcing the size limit as it goes."""
    limit = hub.settings.max_upload_bytes
    size = 0
    with hub.store.scratch_file() as handle:
        path = Path(handle.name)
        try:
            chunk = first
            while chunk:
                size += len(chunk)
                if size > limit:
                    raise _too_large(hub)
                handle.write(chunk)
                for hasher in hashers.values():
                    hasher.update(chunk)
                chunk = stream.read(_CHUNK)
        except BaseException:
            handle.close()
            path.unlink(missing_ok=True)
            raise
    return path


def _hasher(algo: str) -> hashlib._Hash:
    if algo == "blake2b":
        return hashlib.blake2b(digest_size=32)  # type: ignore[return-value]
    return hashlib.new(algo)
