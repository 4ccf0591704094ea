"""Who may read or push an adapter, in Python (one row) and in SQL (a listing): the adapter's
access policy, kept with the resource, as `registry.access` keeps environments'.

A private adapter is visible to its owner's people through a token that reads everything of
that owner (`all`, `read`, `upload:OWNER`; a scope naming one environment covers no
adapter), and to the hub's admins; to anyone else it does not exist: every route answers 404
with the same words as for a name never pushed, so private names cannot be probed. Pushing
takes `all` or `upload:OWNER`.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlmodel import Session, col, select

from hub_server.accounts.auth import Principal
from hub_server.accounts.models import Owner
from hub_server.accounts.service import find_owner
from hub_server.adapters.models import Adapter
from hub_server.core.errors import Forbidden, NotFound, Unauthorized
from registry_index import scopes
from registry_index.names import normalize
from registry_index.schemas.environments import Visibility


def adapter_not_found(owner: str, name: str) -> NotFound:
    return NotFound(
        f"Adapter {owner}/{name} not found (or it is private and your token cannot read it); "
        f"check the name with `prime adapter list {owner}`."
    )


def can_read(principal: Principal | None, owner: Owner, adapter: Adapter) -> bool:
    if adapter.visibility == Visibility.PUBLIC:
        return True
    return principal is not None and principal.reaches_all_of(owner, "read")


def find_adapter(session: Session, owner: Owner, name: str) -> Adapter | None:
    """`owner`'s adapter `name` (any spelling of it), readable or not."""
    return session.exec(
        select(Adapter).where(
            Adapter.owner_id == owner.id, Adapter.normalized_name == normalize(name)
        )
    ).first()


def readable_adapter(
    session: Session, principal: Principal | None, owner_name: str, name: str
) -> tuple[Owner, Adapter]:
    """The owner and adapter `owner/name` if the caller may read it, else 404."""
    owner = find_owner(session, owner_name)
    adapter = find_adapter(session, owner, name) if owner is not None else None
    if owner is None or adapter is None or not can_read(principal, owner, adapter):
        raise adapter_not_found(owner_name, name)
    return owner, adapter


def require_push(
    principal: Principal | None, owner: Owner, adapter: Adapter | None, name: str
) -> Principal:
    """The caller, if it may push to `owner`'s adapter `name` (`adapter`, None when new);
    401/403, or 404 where the caller could not see a private adapter of that name."""
    if adapter is not None and not can_read(principal, owner, adapter):
        raise adapter_not_found(owner.name, name)
    if principal is None:
        raise Unauthorized("Pushing an adapter needs an API token (`prime login`).")
    if adapter is None and not principal.reaches_all_of(owner, "read"):
        raise adapter_not_found(owner.name, name)
    if not principal.reaches_all_of(owner, "write"):
        raise Forbidden(
            f"Your token may not push adapters of {owner.name}; use a token of scope 'all' or "
            f"upload:{owner.name} (`prime hub token create USER --scope upload:{owner.name}`)."
        )
    return principal


def readable_adapters(principal: Principal | None) -> sa.ColumnElement[bool]:
    """SQL form of `can_read` over `Adapter` rows: public, or private and within reach."""
    public = col(Adapter.visibility) == Visibility.PUBLIC
    if principal is None:
        return public
    parsed = [scopes.parse_scope(text) for text in principal.scopes]
    if any(scope.kind in ("all", "read") for scope in parsed):
        covered: sa.ColumnElement[bool] = sa.true()
    else:
        names = [s.owner for s in parsed if s.kind == "upload" and s.name is None]
        covered = col(Adapter.owner_id).in_(select(Owner.id).where(col(Owner.name).in_(names)))
    if principal.user.is_admin:
        return sa.or_(public, covered)
    return sa.or_(public, sa.and_(col(Adapter.owner_id).in_(principal.owner_ids), covered))
