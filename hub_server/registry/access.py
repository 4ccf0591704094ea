"""Who may read or publish an environment, in Python (one row) and in SQL (a listing), and
the lookups with that rule applied: the environment's access policy, kept with the resource.

Everything that is not readable by the caller is reported exactly like something that does
not exist (404 with the same message), so private names cannot be probed. A token's scopes
narrow what its user may reach (`registry_index.scopes`); the SQL forms below are
`Scope.allows` written as conditions. An evaluation run's policy (evals.access) builds on it.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlmodel import Session, col, select

from hub_server.accounts.auth import Principal
from hub_server.accounts.models import Owner
from hub_server.accounts.service import find_owner
from hub_server.core.errors import Forbidden, NotFound, Unauthorized
from hub_server.registry.models import Environment
from registry_index import scopes
from registry_index.names import normalize
from registry_index.schemas.environments import Visibility


def env_not_found(owner: str, name: str) -> NotFound:
    return NotFound(
        f"Environment {owner}/{name} not found (or it is private and your token cannot read "
        "it); check the name with `prime env list --owner " + owner + "`."
    )


def readable_environment(
    session: Session, principal: Principal | None, owner_name: str, name: str
) -> tuple[Owner, Environment]:
    """The owner and environment `owner/name` if the caller may read it, else 404."""
    owner = find_owner(session, owner_name)
    env = None
    if owner is not None:
        env = session.exec(
            select(Environment).where(
                Environment.owner_id == owner.id, Environment.normalized_name == normalize(name)
            )
        ).first()
    if owner is None or env is None or not can_read(principal, owner, env):
        raise env_not_found(owner_name, name)
    return owner, env


def can_read(principal: Principal | None, owner: Owner, env: Environment) -> bool:
    if env.visibility == Visibility.PUBLIC:
        return True
    return principal is not None and principal.could_read_private(owner, env.normalized_name)


def reads_all_of(principal: Principal | None, owner: Owner) -> bool:
    """True when the caller can read every environment of `owner`, private ones included."""
    return principal is not None and principal.reaches_all_of(owner, "read")


def scopes_cover_environments(principal: Principal) -> sa.ColumnElement[bool]:
    """SQL: the token's scopes cover reading the `Environment` row (membership apart)."""
    terms: list[sa.ColumnElement[bool]] = []
    for scope in map(scopes.parse_scope, principal.scopes):
        if scope.kind in ("all", "read"):
            return sa.true()
        if scope.owner is None:  # train: the Lab only, no environment
            continue
        term: sa.ColumnElement[bool] = col(Environment.owner_id).in_(
            select(Owner.id).where(Owner.name == scope.owner)
        )
        if scope.name:
            term = sa.and_(term, col(Environment.normalized_name) == scope.name)
        terms.append(term)
    return sa.or_(*terms) if terms else sa.false()


def readable_environments(principal: Principal | None) -> sa.ColumnElement[bool]:
    """SQL form of `can_read` over `Environment` rows: public, or private and within reach."""
    public = col(Environment.visibility) == Visibility.PUBLIC
    if principal is None:
        return public
    covered = scopes_cover_environments(principal)
    if principal.user.is_admin:
        return sa.or_(public, covered)
    return sa.or_(public, sa.and_(col(Environment.owner_id).in_(principal.owner_ids), covered))


def require_upload(
    principal: Principal | None, owner: Owner, env: Environment | None, new_name: str | None = None
) -> None:
    """401/403/404 unless the caller may publish to `owner`'s `env` (or new `new_name`).

    A missing name is answered like a private one (404) to anyone who could not see a private
    environment there, so writes cannot probe for private names either.
    """
    if env is not None and not can_read(principal, owner, env):
        raise env_not_found(owner.name, env.name)
    if principal is None:
        raise Unauthorized("Publishing needs an API token (`prime login`, or twine's __token__).")
    normalized = env.normalized_name if env is not None else new_name
    if env is None and not principal.could_read_private(owner, normalized or ""):
        raise env_not_found(owner.name, new_name or "")
    if not principal.can_upload(owner, normalized):
        target = f"{owner.name}/{env.name if env is not None else new_name or ''}"
        raise Forbidden(
            f"Your token may not publish to {target}; ask an admin for a token with scope "
            f"upload:{owner.name} (and membership of {owner.name})."
        )


def writable_environment_by_id(
    session: Session, principal: Principal | None, env_id: str
) -> tuple[Owner, Environment]:
    """The environment with this id if the caller may publish to it (404 if unreadable)."""
    env = session.get(Environment, env_id)
    owner = env.owner if env is not None else None
    if env is None or owner is None or not can_read(principal, owner, env):
        raise NotFound(
            f"No environment with id {env_id!r}; resolve it first with "
            "POST /api/v1/environmentshub/resolve."
        )
    require_upload(principal, owner, env)
    return owner, env
