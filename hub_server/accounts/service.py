"""Account operations of a signed-in caller: who they are, their tokens, their browser
sessions, an owner's people.

Each operation checks the caller's scopes itself (`Principal`, over `registry_index.scopes`),
so the web forms and any API route that calls it enforce the same rule.

(Administration without a server, users and organisations included, is `admin`.)
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from sqlmodel import Session, col, select

from hub_server.accounts.auth import (
    Principal,
    generate_token,
    hash_token,
    principal_for_token_id,
    validate_scopes,
)
from hub_server.accounts.models import ApiToken, Membership, Owner, User, WebSession
from hub_server.core.errors import Forbidden
from hub_server.core.ids import utcnow
from registry_index.schemas.accounts import TokenOut, WhoAmI
from registry_index.schemas.environments import OwnerKind


def find_owner(session: Session, name: str) -> Owner | None:
    """The user or organisation named `name` (owner names are case-insensitive)."""
    return session.exec(select(Owner).where(Owner.name == name.lower())).first()


def whoami(session: Session, principal: Principal) -> WhoAmI:
    """The caller, their organisations and the token they called with."""
    orgs = session.exec(
        select(Owner.name).where(
            Owner.kind == OwnerKind.ORG, col(Owner.id).in_(principal.owner_ids)
        )
    ).all()
    return WhoAmI(
        id=principal.user.id,
        username=principal.user.username,
        is_admin=principal.user.is_admin,
        organizations=sorted(orgs),
        token=TokenOut(name=principal.token.name, scopes=principal.scopes),
    )


def token_scopes(name: str, scopes: list[str]) -> list[str]:
    """The canonical scopes of a token to be made; ValueError, saying what to change, for an
    unknown scope or a blank name."""
    canonical = validate_scopes(scopes)
    if not name.strip():
        raise ValueError("Give the token a name (e.g. the machine it is for).")
    return canonical


def new_token(session: Session, user_id: str, name: str, scopes: list[str]) -> tuple[str, ApiToken]:
    """A token for the user, added to `session` (`scopes` from `token_scopes`): the secret,
    shown once, and its row."""
    secret = generate_token()
    row = ApiToken(
        user_id=user_id, name=name, token_hash=hash_token(secret), scopes=" ".join(scopes)
    )
    session.add(row)
    return secret, row


_MANAGE_TOKENS = "Sign in with a token of scope 'all' to create tokens or revoke other tokens."


def create_own_token(session: Session, principal: Principal, name: str, scopes: list[str]) -> str:
    """A new token of the caller's user, committed; returns its secret (shown once). Only a
    token that may manage tokens (scope `all`) makes one (403 otherwise)."""
    if not principal.may_manage_tokens():
        raise Forbidden(_MANAGE_TOKENS)
    secret, _row = new_token(session, principal.user.id, name, scopes)
    session.commit()
    return secret


def tokens_of(session: Session, user_id: str) -> list[ApiToken]:
    """A user's tokens, newest first (rows hold only the hash: the secret is never shown)."""
    return list(
        session.exec(
            select(ApiToken)
            .where(ApiToken.user_id == user_id)
            .order_by(col(ApiToken.created_at).desc())
        ).all()
    )


def revoke_own_token(session: Session, principal: Principal, token_id: str) -> ApiToken | None:
    """Revoke one of the caller's own tokens (idempotent); None when they have no such token.
    Any token may revoke itself; revoking another takes one that may manage tokens (403)."""
    row = session.get(ApiToken, token_id)
    if row is None or row.user_id != principal.user.id:
        return None
    if row.id != principal.token.id and not principal.may_manage_tokens():
        raise Forbidden(_MANAGE_TOKENS)
    if row.revoked_at is None:
        row.revoked_at = utcnow()
        session.add(row)
        session.commit()
    return row


def people_of(session: Session, owner: Owner) -> list[str]:
    """An organisation's members, or the organisations a user belongs to (names, sorted)."""
    if owner.kind == OwnerKind.ORG:
        members = select(User.username).join(Membership, col(Membership.user_id) == col(User.id))
        return sorted(session.exec(members.where(Membership.owner_id == owner.id)).all())
    orgs = (
        select(Owner.name)
        .join(Membership, col(Membership.owner_id) == col(Owner.id))
        .where(Membership.user_id == owner.user_id)
    )
    return sorted(session.exec(orgs).all())


def _session_key(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def open_web_session(session: Session, principal: Principal) -> str:
    """A browser session of `principal`'s token, committed; returns the secret its cookie
    carries (the row keeps only its hash)."""
    secret = secrets.token_urlsafe(32)
    session.add(WebSession(id=_session_key(secret), token_id=principal.token.id))
    session.commit()
    return secret


def web_session_principal(session: Session, secret: str, max_age: timedelta) -> Principal | None:
    """The caller behind a browser session: None when it was signed out, is older than
    `max_age`, or its token no longer works (revoked, user disabled)."""
    row = session.get(WebSession, _session_key(secret))
    if row is None or row.ended_at is not None:
        return None
    created = (
        row.created_at if row.created_at.tzinfo else row.created_at.replace(tzinfo=utcnow().tzinfo)
    )
    if utcnow() - created > max_age:
        return None
    return principal_for_token_id(session, row.token_id)


def end_web_session(session: Session, secret: str) -> None:
    """Sign a browser session out on the server: its cookie, and every copy, stops working."""
    row = session.get(WebSession, _session_key(secret))
    if row is not None and row.ended_at is None:
        row.ended_at = utcnow()
        session.add(row)
        session.commit()
