"""Reading and managing adapters: the listing, one adapter, its versions, one version by
`@spec` (`registry_index.resolve`'s rule, as environments), a file of it, and the patch.
Every lookup goes through `adapters.access` (private is 404 to everyone else)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import quote

from packaging.version import InvalidVersion, Version
from sqlalchemy import func
from sqlmodel import Session, col, select

from hub_server.accounts.auth import Principal
from hub_server.accounts.models import Owner, User
from hub_server.accounts.service import find_owner
from hub_server.adapters.access import readable_adapter, readable_adapters, require_push
from hub_server.adapters.models import Adapter, AdapterFile, AdapterVersion
from hub_server.core.errors import BadRequest, NotFound
from hub_server.core.ids import utcnow
from registry_index.errors import InvalidEnvRef
from registry_index.resolve import select_version
from registry_index.schemas.adapters import (
    AdapterFile as AdapterFileOut,
)
from registry_index.schemas.adapters import (
    AdapterPatch,
    AdapterSummary,
    AdapterVersionInfo,
)
from registry_index.schemas.environments import OwnerOut


@dataclass(frozen=True)
class StoredFile:
    """A file to serve: its blob and the name it downloads as."""

    blob_key: str
    filename: str


def adapter_path(owner: str, name: str) -> str:
    """The REST path of one adapter (under /api/v1)."""
    return f"/api/v1/adapters/{quote(owner, safe='')}/{quote(name, safe='')}"


def versions_of(session: Session, adapter: Adapter) -> list[AdapterVersion]:
    """Every version of `adapter`, newest (by PEP 440) first."""
    rows = session.exec(select(AdapterVersion).where(AdapterVersion.adapter_id == adapter.id)).all()
    return sorted(rows, key=lambda row: Version(row.version), reverse=True)


def _select(session: Session, owner: Owner, adapter: Adapter, spec: str | None) -> AdapterVersion:
    """The version `spec` selects (None or `latest`: the newest); 404 listing what exists."""
    rows = versions_of(session, adapter)
    try:
        chosen = select_version([(Version(row.version), False) for row in rows], spec)
    except InvalidEnvRef as error:
        raise BadRequest(str(error)) from None
    except LookupError as error:
        raise NotFound(f"Adapter {owner.name}/{adapter.name}: {error}") from None
    return next(row for row in rows if Version(row.version) == chosen)


def version_info(
    session: Session, owner: Owner, adapter: Adapter, row: AdapterVersion, base_url: str
) -> AdapterVersionInfo:
    files = session.exec(
        select(AdapterFile)
        .where(AdapterFile.version_id == row.id)
        .order_by(col(AdapterFile.filename))
    ).all()
    uploader = session.get(User, row.uploaded_by) if row.uploaded_by else None
    where = f"{base_url}{adapter_path(owner.name, adapter.name)}/@{quote(row.version, safe='')}"
    return AdapterVersionInfo(
        owner=owner.name,
        name=adapter.name,
        version=row.version,
        base_model=row.base_model,
        rank=row.rank,
        lora_alpha=row.lora_alpha,
        target_modules=json.loads(row.target_modules),
        size=row.size,
        files=[
            AdapterFileOut(
                filename=file.filename,
                sha256=file.sha256,
                size=file.size,
                url=f"{where}/files/{quote(file.filename, safe='')}",
            )
            for file in files
        ],
        uploaded_by=uploader.username if uploader is not None else None,
        created_at=row.created_at,
    )


def summaries(session: Session, rows: Sequence[tuple[Adapter, Owner]]) -> list[AdapterSummary]:
    out = []
    for adapter, owner in rows:
        latest = versions_of(session, adapter)[:1]
        out.append(
            AdapterSummary(
                id=adapter.id,
                owner=OwnerOut(name=owner.name, kind=owner.kind),
                name=adapter.name,
                description=adapter.description,
                visibility=adapter.visibility,
                latest_version=latest[0].version if latest else None,
                base_model=latest[0].base_model if latest else None,
                created_at=adapter.created_at,
                updated_at=adapter.updated_at,
            )
        )
    return out


def list_adapters(
    session: Session, principal: Principal | None, owner_name: str | None, page: int,
    per_page: int,
) -> tuple[list[AdapterSummary], int]:  # fmt: skip
    """One page of the adapters the caller may read (of `owner_name` when given), newest
    change first, and how many there are in all."""
    condition = readable_adapters(principal)
    if owner_name is not None:
        owner = find_owner(session, owner_name)
        if owner is None:
            return [], 0
        condition = condition & (col(Adapter.owner_id) == owner.id)
    total = session.exec(select(func.count()).select_from(Adapter).where(condition)).one()
    rows = session.exec(
        select(Adapter, Owner)
        .join(Owner, col(Owner.id) == col(Adapter.owner_id))
        .where(condition)
        .order_by(col(Adapter.updated_at).desc(), col(Adapter.id))
        .offset((page - 1) * per_page)
        .limit(per_page)
    ).all()
    return summaries(session, list(rows)), int(total)


def adapter_summary(
    session: Session, principal: Principal | None, owner_name: str, name: str
) -> AdapterSummary:
    owner, adapter = readable_adapter(session, principal, owner_name, name)
    return summaries(session, [(adapter, owner)])[0]


def list_versions(
    session: Session, principal: Principal | None, owner_name: str, name: str, base_url: str
) -> list[AdapterVersionInfo]:
    owner, adapter = readable_adapter(session, principal, owner_name, name)
    return [
        version_info(session, owner, adapter, row, base_url)
        for row in versions_of(session, adapter)
    ]


def get_version(
    session: Session, principal: Principal | None, owner_name: str, name: str, ref: str,
    base_url: str,
) -> AdapterVersionInfo:  # fmt: skip
    """The version `@ref` selects: `latest`, an exact version, or a specifier."""
    owner, adapter = readable_adapter(session, principal, owner_name, name)
    row = _select(session, owner, adapter, None if ref == "latest" else ref)
    return version_info(session, owner, adapter, row, base_url)


def version_file(
    session: Session, principal: Principal | None, owner_name: str, name: str, ref: str,
    filename: str,
) -> StoredFile:  # fmt: skip
    """A file of the exact version `ref`; 404 when there is no such file."""
    owner, adapter = readable_adapter(session, principal, owner_name, name)
    try:
        exact = f"=={Version(ref)}"
    except InvalidVersion:
        raise NotFound(f"Files are served by exact version; {ref!r} is not one.") from None
    row = _select(session, owner, adapter, exact)
    file = session.get(AdapterFile, (row.id, filename))
    if file is None:
        raise NotFound(
            f"Adapter {owner.name}/{adapter.name}@{row.version} has no file {filename!r}."
        )
    return StoredFile(file.blob_key, file.filename)


def update_adapter(
    session: Session, principal: Principal | None, owner_name: str, name: str,
    patch: AdapterPatch,
) -> AdapterSummary:  # fmt: skip
    """Change the description or visibility of an adapter one may push to."""
    owner, adapter = readable_adapter(session, principal, owner_name, name)
    require_push(principal, owner, adapter, name)
    if patch.description is not None:
        adapter.description = patch.description
    if patch.visibility is not None:
        adapter.visibility = patch.visibility
    adapter.updated_at = utcnow()
    session.add(adapter)
    session.commit()
    session.refresh(adapter)
    return summaries(session, [(adapter, owner)])[0]
