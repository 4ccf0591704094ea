"""Twine / `uv publish` uploads (PyPI's "legacy" API): who may upload where, and the form's
file checked, spooled, validated and published (`registry.publishing`).

Nothing is written before the file has passed validation, and the scratch copy is always
removed. An identical re-upload succeeds (a re-run of `twine upload` must).
"""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path
from typing import IO, Protocol

import sqlalchemy as sa
from packaging.version import InvalidVersion, Version
from sqlalchemy.engine import Engine
from sqlmodel import Session
from starlette.datastructures import FormData, UploadFile

from hub_server.accounts.auth import Principal
from hub_server.accounts.models import Owner
from hub_server.accounts.service import find_owner
from hub_server.core.blobstore import BlobStorage
from hub_server.core.errors import BadRequest, Forbidden, NotFound, TooLarge
from hub_server.core.rows import table_of
from hub_server.core.settings import HubSettings
from hub_server.registry.access import require_upload
from hub_server.registry.models import Environment
from hub_server.registry.publishing import EnvTarget, NewFile, publish_file
from registry_index.errors import InvalidUpload
from registry_index.filenames import parse_filename
from registry_index.names import normalize
from registry_index.schemas.versions import FileKind
from registry_index.validation import UploadLimits, validate_distribution

CHUNK = 1024 * 1024
_FILETYPES = {"bdist_wheel": FileKind.WHEEL, "sdist": FileKind.SDIST}
# The upload's project, looked up before the body is spooled: built once (composing the
# statement on every upload cost more than running it), and read as a plain row (a new
# project, the usual case, then needs no ORM machinery at all).
_ENVIRONMENTS = table_of(Environment)
_ENVIRONMENT = sa.select(_ENVIRONMENTS).where(
    _ENVIRONMENTS.c.owner_id == sa.bindparam("owner_id"),
    _ENVIRONMENTS.c.normalized_name == sa.bindparam("normalized"),
)


class _Hasher(Protocol):
    def update(self, data: bytes, /) -> None: ...
    def hexdigest(self) -> str: ...


def check_token(principal: Principal, settings: HubSettings, declared: str | None) -> None:
    """403 for a read-only token, 413 for a declared body (`Content-Length`) over the limit."""
    if not principal.may_write_anything():
        raise Forbidden(
            "This token is read-only; upload with a token of scope 'all' or "
            "'upload:OWNER[/NAME]' (`prime hub token create --scope upload:OWNER`)."
        )
    if declared and declared.isdigit() and int(declared) > settings.max_upload_bytes + CHUNK:
        raise too_large(settings)


def target_owner_name(principal: Principal, owner_name: str | None) -> str:
    """The owner named in the URL, else the token's single upload owner, else the user."""
    if owner_name is not None:
        return owner_name
    named = principal.upload_owner_names()
    return named[0] if len(named) == 1 else principal.user.username


def find_target_owner(engine: Engine, name: str) -> Owner:
    with Session(engine, expire_on_commit=False) as session:
        owner = find_owner(session, name)
    if owner is None:
        raise NotFound(f"No owner named {name!r} on this hub.")
    return owner


def check_owner(principal: Principal, owner: Owner) -> None:
    """403 before the body is read when the token can write nothing of the target owner."""
    if not principal.may_write_some_of(owner):
        raise Forbidden(
            f"Your token may not publish to {owner.name}/; ask an admin for a token with scope "
            f"upload:{owner.name} (and membership of {owner.name})."
        )


def too_large(settings: HubSettings) -> TooLarge:
    limit = settings.max_upload_bytes / (1024 * 1024)
    return TooLarge(f"The upload is larger than this hub's {limit:.0f} MiB limit per file.")


def _field(form: FormData, name: str) -> str:
    value = form.get(name)
    return value.strip() if isinstance(value, str) else ""


def handle_upload(
    engine: Engine, store: BlobStorage, settings: HubSettings, principal: Principal,
    owner: Owner, form: FormData,
) -> str:  # fmt: skip
    """Check, validate and publish the form's file; the answer twine shows on success."""
    action = _field(form, ":action")
    if action != "file_upload":
        raise BadRequest(f"Unsupported ':action' {action!r}; only 'file_upload' is supported.")
    if _field(form, "protocol_version") != "1":
        raise BadRequest("Unknown protocol_version; upload with twine or `uv publish`.")
    content = form.get("content")
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

    with engine.connect() as connection:
        found = connection.execute(
            _ENVIRONMENT, {"owner_id": owner.id, "normalized": parsed.name}
        ).first()
    env = None if found is None else Environment(**found._mapping)
    require_upload(principal, owner, env, parsed.name)  # 404 for one the caller cannot read

    upload = _spool(store, settings, content.file, digests)
    try:
        try:
            validated = validate_distribution(
                upload, filename, UploadLimits(max_file_size=settings.max_upload_bytes)
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
        result = publish_file(engine, store, target, new, upload, principal.user.id)
    finally:
        if isinstance(upload, Path):
            upload.unlink(missing_ok=True)
    return "OK" if result.created else f"{filename} was already uploaded with the same content."


def _safe_version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def _spool(
    store: BlobStorage, settings: HubSettings, stream: IO[bytes], digests: dict[str, str]
) -> Path | bytes:
    """The upload, within the size limit and matching the digests the client sent.

    One that fits in a chunk (most wheels) stays in memory: it is validated there and written
    once, straight to its blob, by the blob writer (a scratch file first cost a file creation
    and two more opens on the request's own thread). A larger one goes to a scratch file on
    the store's filesystem, which becomes its blob by a rename.
    """
    hashers = {algo: _hasher(algo) for algo in digests}
    stream.seek(0)
    first = stream.read(CHUNK)
    upload = first if len(first) < CHUNK else _scratch_copy(store, settings, first, stream, hashers)
    if isinstance(upload, bytes):
        if len(upload) > settings.max_upload_bytes:
            raise too_large(settings)
        for hasher in hashers.values():
            hasher.update(upload)
    for algo, expected in digests.items():
        # As bytes: compare_digest raises TypeError for a str with non-ASCII characters, which
        # any form value may carry.
        if not hmac.compare_digest(hashers[algo].hexdigest().encode(), expected.encode()):
            if isinstance(upload, Path):
                upload.unlink(missing_ok=True)
            raise BadRequest(
                f"The {algo} digest supplied does not match a digest calculated from the "
                "uploaded file; the upload was corrupted, try again."
            )
    return upload


def _scratch_copy(
    store: BlobStorage, settings: HubSettings, first: bytes, stream: IO[bytes],
    hashers: dict[str, _Hasher],
) -> Path:  # fmt: skip
    """Copy the upload (`first` chunk, then the rest of `stream`) to a scratch file, hashing it
    and enforcing the size limit as it goes."""
    limit = settings.max_upload_bytes
    size = 0
    with store.scratch_file() as handle:
        path = Path(handle.name)
        try:
            chunk = first
            while chunk:
                size += len(chunk)
                if size > limit:
                    raise too_large(settings)
                handle.write(chunk)
                for hasher in hashers.values():
                    hasher.update(chunk)
                chunk = stream.read(CHUNK)
        except BaseException:
            handle.close()
            path.unlink(missing_ok=True)
            raise
    return path


def _hasher(algo: str) -> _Hasher:
    if algo == "blake2b":
        return hashlib.blake2b(digest_size=32)
    return hashlib.new(algo)
