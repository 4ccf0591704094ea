"""Looking up owners and environments with the visibility rule applied.

Everything that is not readable by the caller is reported exactly like something that does
not exist (404 with the same message), so private names cannot be probed.
"""

from __future__ import annotations

from sqlmodel import Session, select

from hub_server.accounts.auth import Principal
from hub_server.accounts.models import Owner
from hub_server.core.errors import Forbidden, NotFound, Unauthorized
from hub_server.registry.models import Environment
from registry_index.names import normalize
from registry_index.schemas.environments import Visibility


def env_not_found(owner: str, name: str) -> NotFound:
    return NotFound(
        f"Environment {owner}/{name} not found (or it is private and your token cannot read "
        "it); check the name with `prime env list --owner " + owner + "`."
    )


def find_owner(session: Session, name: str) -> Owner | None:
    return session.exec(select(Owner).where(Owner.name == name.lower())).first()


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
    return principal is not None and principal.can_read(owner, env)


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
    owner = session.get(Owner, env.owner_id) if env is not None else None
    if env is None or owner is None or not can_read(principal, owner, env):
        raise NotFound(
            f"No environment with id {env_id!r}; resolve it first with "
            "POST /api/v1/environmentshub/resolve."
        )
    require_upload(principal, owner, env)
    return owner, env
