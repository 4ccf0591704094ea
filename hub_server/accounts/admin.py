"""Server administration without a running server: users, organisations, tokens.

`prime hub user add|org add|token create` call these on the same database the server uses,
so an operator can bootstrap a hub (first admin, first token) before starting it.
"""

from __future__ import annotations

from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from hub_server.accounts.auth import generate_token, hash_token, validate_scopes
from hub_server.accounts.models import ApiToken, Membership, Owner, User
from hub_server.core.db import make_engine, migrate, session_scope
from hub_server.core.ids import utcnow
from hub_server.core.settings import HubSettings
from registry_index.names import OWNER_RULE, is_valid_owner_name


class AdminError(ValueError):
    """A refused admin action; the message says what to do instead."""


def open_database(settings: HubSettings) -> Engine:
    """The hub's engine with the schema migrated (creates the data directory if needed)."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    engine = make_engine(settings.resolved_database_url)
    migrate(engine)
    return engine


def check_owner_name(name: str) -> None:
    """User and organisation names are URL path segments: keep them simple."""
    if not is_valid_owner_name(name):
        raise AdminError(f"{name!r} is not a valid user or organisation name: {OWNER_RULE}.")


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
            session.add(Owner(name=name, kind="user", user_id=user.id))
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
        org = Owner(name=name, kind="org")
        session.add(org)
        session.flush()
        for user in users:
            session.add(Membership(owner_id=org.id, user_id=user.id))
        return org


def add_members(engine: Engine, org_name: str, members: list[str]) -> None:
    """Add users to an existing organisation (idempotent)."""
    with session_scope(engine) as session:
        org = session.exec(select(Owner).where(Owner.name == org_name, Owner.kind == "org")).first()
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
        canonical = validate_scopes(list(scopes or []))
    except ValueError as exc:
        raise AdminError(str(exc)) from None
    if not token_name.strip():
        raise AdminError("Give the token a name (e.g. the machine it is for).")
    secret = generate_token()
    with session_scope(engine) as session:
        user = _user(session, username)
        row = ApiToken(
            user_id=user.id,
            name=token_name,
            token_hash=hash_token(secret),
            scopes=" ".join(canonical),
        )
        session.add(row)
        return secret, row


def revoke_token(engine: Engine, token: str) -> None:
    """Revoke a token by its secret value."""
    with session_scope(engine) as session:
        row = session.exec(select(ApiToken).where(ApiToken.token_hash == hash_token(token))).first()
        if row is None:
            raise AdminError("No such token.")
        row.revoked_at = utcnow()
        session.add(row)
