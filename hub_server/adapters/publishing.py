"""Pushing an adapter version: what can be refused before the body is read (`check_push`:
the name, the token, the version), then the files checked as a PEFT LoRA adapter
(`registry_index.peft_adapter`) and the owner's quota, then the files stored as
content-addressed blobs, and only then the rows, in one transaction (blob first, rows second,
as `registry.publishing`): a refused push stores nothing, and a row always names whole blobs.

Versions are immutable: a version that exists is a 409 (in any spelling PEP 440 compares
equal: `1.0` is `1`). Without a version, a push is the next whole number after the newest
version's first one (1, 2, …). A push creates the adapter (private unless it says public);
on an existing adapter it never changes the visibility (`update_adapter` does).
A Lab checkpoint is published from the hub's own copy (`publish_from_lab`): the caller's own
checkpoints only, another account's is 404 like a path never saved.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from packaging.utils import canonicalize_version
from packaging.version import InvalidVersion, Version
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, func, select

from hub_server.accounts.auth import Principal
from hub_server.accounts.models import Owner
from hub_server.accounts.service import find_owner
from hub_server.adapters.access import find_adapter, require_push
from hub_server.adapters.models import Adapter, AdapterFile, AdapterVersion
from hub_server.adapters.service import version_info, versions_of
from hub_server.core.blobstore import BlobStorage, content_key
from hub_server.core.errors import BadRequest, Conflict, Forbidden, NotFound, TooLarge
from hub_server.core.ids import utcnow
from hub_server.core.settings import HubSettings
from hub_server.lab.checkpoints import CheckpointStore, TinkerPath
from registry_index import scopes
from registry_index.errors import InvalidUpload
from registry_index.names import normalize, validate_project_name
from registry_index.peft_adapter import (
    CONFIG,
    FILES,
    MAX_CONFIG_BYTES,
    WEIGHTS,
    check_weights,
    read_config,
)
from registry_index.schemas.adapters import (
    MAX_BASE_MODEL_LENGTH,
    AdapterVersionInfo,
    LabPublish,
    PublishOptions,
)
from registry_index.schemas.environments import Visibility

CHUNK = 1024 * 1024


@dataclass(frozen=True)
class Staged:
    """A pushed file in a scratch file of the blob store (consumed when stored)."""

    path: Path
    sha256: str
    size: int


@dataclass(frozen=True)
class Target:
    """Where a push goes, as `check_push` found it."""

    owner: Owner
    adapter: Adapter | None
    name: str
    version: str


def file_limit(settings: HubSettings, filename: str) -> int:
    """The most bytes a pushed file may have (the weights: the hub's upload limit)."""
    return MAX_CONFIG_BYTES if filename == CONFIG else settings.max_upload_bytes


def stage(store: BlobStorage, source: IO[bytes], filename: str, limit: int) -> Staged:
    """Copy `source` into a scratch file of the store, hashing it; 413 past `limit` bytes."""
    digest, size = hashlib.sha256(), 0
    with store.scratch_file() as handle:
        path = Path(handle.name)
        try:
            while block := source.read(CHUNK):
                size += len(block)
                if size > limit:
                    raise TooLarge(
                        f"{filename} is larger than this hub accepts ({limit} bytes); the "
                        "hub's operator sets the limit (PRIME_HUB_MAX_UPLOAD_BYTES)."
                    )
                digest.update(block)
                handle.write(block)
        except BaseException:
            path.unlink(missing_ok=True)
            raise
    return Staged(path, digest.hexdigest(), size)


def discard(staged: dict[str, Staged]) -> None:
    """Remove the scratch files a push did not store."""
    for file in staged.values():
        file.path.unlink(missing_ok=True)


def check_push(
    session: Session, principal: Principal | None, owner_name: str, name: str,
    options: PublishOptions,
) -> Target:  # fmt: skip
    """Everything a push can be refused for before its files are read: 400/401/403/404/409."""
    try:
        validate_project_name(name)
    except InvalidUpload as error:
        raise BadRequest(str(error).replace("project name", "adapter name")) from None
    owner = find_owner(session, owner_name)
    if owner is None:
        raise NotFound(f"No user or organisation named {owner_name!r} on this hub.")
    adapter = find_adapter(session, owner, name)
    require_push(principal, owner, adapter, name)
    if adapter is not None and options.visibility not in (None, adapter.visibility):
        raise Conflict(
            f"Adapter {owner.name}/{adapter.name} is {adapter.visibility}; a push never changes "
            f"that: change it with `prime adapter edit {owner.name}/{adapter.name} "
            f"--{options.visibility}` (PATCH), or push without a visibility."
        )
    return Target(owner, adapter, name, _new_version(owner, adapter, options.version, session))


def _new_version(
    owner: Owner, adapter: Adapter | None, wanted: str | None, session: Session
) -> str:
    """The version a push makes: `wanted` in PEP 440's normal form (409 when it exists), or
    the next whole number."""
    rows = versions_of(session, adapter) if adapter is not None else []
    if wanted is None:
        return str(max((Version(row.version).release[0] for row in rows), default=0) + 1)
    try:
        version = str(Version(wanted))
    except InvalidVersion:
        raise BadRequest(
            f"{wanted!r} is not a version; use a PEP 440 version such as 1, 1.2 or 2.0rc1 "
            "(or none: the next whole number)."
        ) from None
    canonical = canonicalize_version(version)
    taken = next((row for row in rows if row.canonical_version == canonical), None)
    if taken is not None:
        assert adapter is not None
        raise Conflict(
            f"Adapter {owner.name}/{adapter.name} already has version {taken.version}; versions "
            "are immutable: push under another version (or none: the next whole number)."
        )
    return version


def publish(
    session: Session, store: BlobStorage, settings: HubSettings, principal: Principal | None,
    owner_name: str, name: str, files: dict[str, Staged], options: PublishOptions, base_url: str,
) -> AdapterVersionInfo:  # fmt: skip
    """Check and store the pushed `files` as a new version (see the module doc)."""
    target = check_push(session, principal, owner_name, name, options)  # again, after the body
    assert principal is not None  # check_push refuses anonymous pushes
    missing = [filename for filename in FILES if filename not in files]
    if missing or len(files) != len(FILES):
        raise BadRequest(
            f"An adapter push is exactly {CONFIG} and {WEIGHTS} (what peft's save_pretrained "
            f"writes); this one has {sorted(files)}."
        )
    for filename, file in files.items():
        if file.size > file_limit(settings, filename):
            raise TooLarge(
                f"{filename} is {file.size} bytes, more than this hub accepts "
                f"({file_limit(settings, filename)}); the hub's operator sets the limit "
                "(PRIME_HUB_MAX_UPLOAD_BYTES)."
            )
    try:
        config = read_config(files[CONFIG].path.read_bytes())
        with files[WEIGHTS].path.open("rb") as handle:
            check_weights(handle, files[WEIGHTS].size)
    except InvalidUpload as error:
        raise BadRequest(f"Not a PEFT LoRA adapter: {error}") from None
    base_model = options.base_model or config.base_model
    if base_model is None or len(base_model) > MAX_BASE_MODEL_LENGTH:
        raise BadRequest(
            f"{CONFIG} names no base model (base_model_name_or_path) of at most "
            f"{MAX_BASE_MODEL_LENGTH} characters; say which model the adapter is for "
            "(`--base-model`)."
        )
    size = sum(file.size for file in files.values())
    _check_quota(session, target.owner, size, settings.max_adapter_bytes_per_owner)
    for file in files.values():
        store.put_file(file.path, content_key(file.sha256))
    adapter = target.adapter or Adapter(
        owner_id=target.owner.id,
        name=name,
        normalized_name=normalize(name),
        visibility=options.visibility or Visibility.PRIVATE,
    )
    adapter.updated_at = utcnow()
    row = AdapterVersion(
        adapter_id=adapter.id,
        version=target.version,
        canonical_version=canonicalize_version(target.version),
        base_model=base_model,
        rank=config.rank,
        lora_alpha=config.lora_alpha,
        target_modules=json.dumps(config.target_modules),
        size=size,
        uploaded_by=principal.user.id,
    )
    try:
        session.add(adapter)
        session.flush()  # the rows in their foreign keys' order
        session.add(row)
        session.flush()
        for filename, file in files.items():
            session.add(
                AdapterFile(
                    version_id=row.id,
                    filename=filename,
                    sha256=file.sha256,
                    size=file.size,
                    blob_key=content_key(file.sha256),
                )
            )
        session.commit()
    except IntegrityError:
        session.rollback()
        raise Conflict(
            f"Adapter {target.owner.name}/{name} {target.version} was pushed by another "
            "request meanwhile; versions are immutable: push under another version."
        ) from None
    return version_info(session, target.owner, adapter, row, base_url)


def _check_quota(session: Session, owner: Owner, size: int, quota: int) -> None:
    used = session.exec(
        select(func.coalesce(func.sum(AdapterVersion.size), 0))
        .join(Adapter, col(Adapter.id) == col(AdapterVersion.adapter_id))
        .where(Adapter.owner_id == owner.id)
    ).one()
    if int(used) + size > quota:
        raise TooLarge(
            f"{owner.name}'s adapters would exceed their quota: {used} of {quota} bytes are "
            f"used and this version is {size}; the hub's operator sets it "
            "(PRIME_HUB_MAX_ADAPTER_BYTES_PER_OWNER)."
        )


def publish_from_lab(
    session: Session, engine: Engine, store: BlobStorage, settings: HubSettings,
    principal: Principal | None, owner_name: str, name: str, body: LabPublish, base_url: str,
) -> AdapterVersionInfo:  # fmt: skip
    """Publish the caller's own Lab checkpoint `body.checkpoint` (its PEFT files, without the
    optimizer state) as a new version; the token must also carry the `train` scope."""
    check_push(session, principal, owner_name, name, body)
    assert principal is not None
    if not scopes.trains(principal.scopes):
        raise Forbidden(
            "Publishing a Lab checkpoint reads it as its trainer: use a token with the train "
            "scope beside the upload one (scope 'all' has both)."
        )
    path = TinkerPath.parse(body.checkpoint)
    checkpoints = CheckpointStore(engine, store, quota_bytes=0)  # read only: saves nothing
    try:
        found = checkpoints.peft_files(checkpoints.find(principal.user.id, path))
    except FileNotFoundError:
        raise NotFound(f"No checkpoint {path} on this Lab for this account.") from None
    staged: dict[str, Staged] = {}
    try:
        for filename, data in found.items():
            digest = hashlib.sha256(data).hexdigest()
            staged[filename] = Staged(store.scratch_copy(data), digest, len(data))
        return publish(
            session, store, settings, principal, owner_name, name, staged, body, base_url
        )
    finally:
        discard(staged)
