"""Server administration without a running server: users, organisations, tokens.

`prime hub user add|org add|token create` call these on the same database the server uses,
so an operator can bootstrap a hub (first admin, first token) before starting it. It stands
above every route (a new owner's name may not be a word of theirs: `routes`), beside `app`.
"""

from __future__ import annotations

from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from hub_server.accounts.auth import hash_token
from hub_server.accounts.models import ApiToken, Membership, Owner, User
from hub_server.accounts.service import new_token, token_scopes
from hub_server.core.db import make_engine, migrate, session_scope
from hub_server.core.ids import utcnow
from hub_server.core.settings import HubSettings
from hub_server.routes import reserved_owner_names
from registry_index.names import OWNER_RULE, is_valid_owner_name
from registry_index.schemas.environments import OwnerKind


class AdminError(ValueError):
    """A refused admin action; the message says what to do instead."""


def open_database(settings: HubSettings) -> Engine:
    """The hub's engine with the schema migrated (creates the data directory if needed)."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    engine = make_engine(settings.resolved_database_url)
    migrate(engine)
    return engine


def check_owner_name(name: str) -> None:
    """User and organisation names are URL path segments: keep them simple, and never a word
    of the hub's own routes (`routes.reserved_owner_names`)."""
    if not is_valid_owner_name(name):
        raise AdminError(f"{name!r} is not a valid user or organisation name: {OWNER_RULE}.")
    if name in reserved_owner_names():
        raise AdminError(
            f"{name!r} is reserved: the hub's own routes use it (/{name}/…), so a user or "
            "organisation of that name would shadow them or be shadowed; choose another name."
        )


def _owner_taken(session: Session, name: str) -> bool:
    return session.exec(select(Owner).where(Owner.name == name)).first() is not None


def create_user(engine: Engine, name: str, *, admin: bool = False) -> User:
    """A new user and its own namespace `name/`."""
    check_owner_name(name)
    try:
        with session_scope(engine) as session:
            if _owner_taken(session, name):
                raise AdminError(f"The name {name!r} is already taken by a user or organisation.")
            user = User(username=name, is_admin=admin)
            session.add(user)
            session.flush()
            session.add(Owner(name=name, kind=OwnerKind.USER, user_id=user.id))
            return user
    except IntegrityError:
        raise AdminError(f"The name {name!r} is already taken by a user or organisation.") from None


def ensure_user(engine: Engine, name: str) -> None:
    """Create user `name` unless it exists (idempotent, for seeding a hub again)."""
    with Session(engine) as session:
        if session.exec(select(User).where(User.username == name)).first() is not None:
            return
    create_user(engine, name)


def _user(session: Session, name: str) -> User:
    user = session.exec(select(User).where(User.username == name)).first()
    if user is None:
        raise AdminError(f"No user named {name!r}; create it with `prime hub user add {name}`.")
    return user


def create_org(engine: Engine, name: str, members: list[str]) -> Owner:
    """A new organisation namespace `name/` with these users as members."""
    check_owner_name(name)
    with session_scope(engine) as session:
        if _owner_taken(session, name):
            raise AdminError(f"The name {name!r} is already taken by a user or organisation.")
        users = [_user(session, member) for member in members]
        org = Owner(name=name, kind=OwnerKind.ORG)
        session.add(org)
        session.flush()
        for user in users:
            session.add(Membership(owner_id=org.id, user_id=user.id))
        return org


def add_members(engine: Engine, org_name: str, members: list[str]) -> None:
    """Add users to an existing organisation (idempotent)."""
    with session_scope(engine) as session:
        org = session.exec(
            select(Owner).where(Owner.name == org_name, Owner.kind == OwnerKind.ORG)
        ).first()
        if org is None:
            raise AdminError(
                f"No organisation named {org_name!r}; create it with `prime hub org add`."
            )
        for member in members:
            user = _user(session, member)
            if session.get(Membership, (org.id, user.id)) is None:
                session.add(Membership(owner_id=org.id, user_id=user.id))


def create_token(
    engine: Engine, username: str, token_name: str, scopes: list[str] | None = None
) -> tuple[str, ApiToken]:
    """A new token for `username`; returns the secret (shown once) and its row."""
    try:
        canonical = token_scopes(token_name, list(scopes or []))
    except ValueError as exc:
        raise AdminError(str(exc)) from None
    with session_scope(engine) as session:
        user = _require_user(session, username)
        return new_token(session, user.id, token_name, canonical)


def revoke_token(engine: Engine, token: str) -> None:
    """Revoke a token by its secret value."""
    with session_scope(engine) as session:
        row = session.exec(select(ApiToken).where(ApiToken.token_hash == hash_token(token))).first()
        if row is None:
            raise AdminError("No such token.")
        row.revoked_at = utcnow()
        session.add(row)


def _require_user(session: Session, name: str) -> User:
    user = _user(session, name)
    if user.deleted_at is not None:
        raise AdminError(f"User {name!r} was deleted; the name stays reserved.")
    return user


def disable_user(engine: Engine, name: str, *, disabled: bool = True) -> None:
    """Disable (or re-enable) a user: every token of theirs fails at once, on every route."""
    with session_scope(engine) as session:
        user = _require_user(session, name)
        user.disabled_at = utcnow() if disabled else None
        session.add(user)


def delete_user(engine: Engine, name: str) -> None:
    """Delete a user's access for good: tokens revoked, memberships removed, name reserved.

    Published files and evaluation runs stay (files are immutable history, and other users
    may depend on them); an admin can yank or hide them.
    """
    with session_scope(engine) as session:
        user = _require_user(session, name)
        now = utcnow()
        user.disabled_at = user.disabled_at or now
        user.deleted_at = now
        user.is_admin = False
        session.add(user)
        for row in session.exec(select(ApiToken).where(ApiToken.user_id == user.id)):
            if row.revoked_at is None:
                row.revoked_at = now
                session.add(row)
        for membership in session.exec(select(Membership).where(Membership.user_id == user.id)):
            session.delete(membership)


def remove_member(engine: Engine, org_name: str, member: str) -> None:
    """Remove a user from an organisation; their tokens lose its private data at once."""
    with session_scope(engine) as session:
        org = session.exec(
            select(Owner).where(Owner.name == org_name, Owner.kind == OwnerKind.ORG)
        ).first()
        if org is None:
            raise AdminError(f"No organisation named {org_name!r}.")
        user = _user(session, member)
        membership = session.get(Membership, (org.id, user.id))
        if membership is None:
            raise AdminError(f"{member!r} is not a member of {org_name!r}.")
        session.delete(membership)


def list_tokens(engine: Engine, username: str) -> list[ApiToken]:
    """A user's tokens, oldest first (rows hold only the hash: the secret is never shown)."""
    with Session(engine, expire_on_commit=False) as session:
        user = _user(session, username)
        return list(
            session.exec(
                select(ApiToken)
                .where(ApiToken.user_id == user.id)
                .order_by(col(ApiToken.created_at), col(ApiToken.id))
            )
        )


def revoke_token_id(engine: Engine, token_id: str) -> ApiToken:
    """Revoke a token by its id (from `prime hub token list`); idempotent."""
    with session_scope(engine) as session:
        row = session.get(ApiToken, token_id)
        if row is None:
            raise AdminError(
                f"No token with id {token_id!r}; see `prime hub token list USER` for the ids."
            )
        if row.revoked_at is None:
            row.revoked_at = utcnow()
            session.add(row)
        return row
