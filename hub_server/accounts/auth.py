"""API tokens and what a token may do.

Tokens are `phub_` + 256 random bits; only their sha256 is stored, so a database leak does not
leak credentials. A token's scopes narrow what its user may do:

- `all`: everything the user may do;
- `read`: read everything the user may read (private environments of their owners);
- `upload:OWNER`: publish, yank and edit any environment of OWNER (and read them);
- `upload:OWNER/NAME`: the same for one environment.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import aliased
from sqlalchemy.orm.attributes import set_committed_value
from sqlmodel import Session, col, select

from hub_server.accounts.models import ApiToken, Membership, Owner, User
from hub_server.core.ids import utcnow
from hub_server.core.out_of_space import out_of_space
from registry_index import scopes as token_scopes

TOKEN_PREFIX = "phub_"
# `last_used_at` is written at most this often per token (a write per request would queue
# every reader behind SQLite's single writer).
_LAST_USED_RESOLUTION = timedelta(minutes=1)


def generate_token() -> str:
    """A new random token (shown once, never stored in clear)."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """The stored form of a token."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def validate_scopes(scopes: list[str]) -> list[str]:
    """Canonical scopes (`registry_index.scopes`: names normalised); ValueError on junk."""
    return token_scopes.canonical_scopes(scopes)


def credentials_from_header(authorization: str | None) -> str | None:
    """The token in `Bearer T`, `token T` or Basic `<any user>:T`, else None."""
    if not authorization:
        return None
    scheme, _, value = authorization.strip().partition(" ")
    scheme = scheme.lower()
    value = value.strip()
    if scheme in ("bearer", "token"):
        return value or None
    if scheme == "basic":
        try:
            decoded = base64.b64decode(value, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
        _, _, password = decoded.partition(":")
        return password or None
    return None


TINKER_KEY_PREFIX = "tml-"


def credentials_from_api_key(api_key: str | None) -> str | None:
    """The token in an `X-API-Key` header (the Tinker SDK's, which insists on a `tml-`
    prefix: `TINKER_API_KEY=tml-<hub token>`), else None."""
    if not api_key:
        return None
    return api_key.strip().removeprefix(TINKER_KEY_PREFIX) or None


@dataclass
class Principal:
    """An authenticated caller: a user acting through one token."""

    user: User
    token: ApiToken
    scopes: list[str]
    owner_ids: set[str] = field(default_factory=set)  # owners the user belongs to
    # Those owners by name, loaded with the principal, so a route that names one of them (an
    # upload) needs no second lookup.
    owners: dict[str, Owner] = field(default_factory=dict)

    def _user_reaches(self, owner: Owner) -> bool:
        return self.user.is_admin or owner.id in self.owner_ids

    def scope_reads(self, owner_name: str, normalized_name: str) -> bool:
        """The token's scopes cover reading `owner/name` (membership is checked apart)."""
        return token_scopes.allows(self.scopes, "read", owner_name, normalized_name)

    def scope_writes(self, owner_name: str, normalized_name: str | None) -> bool:
        """The token's scopes cover writing to `owner/name` (any name of owner when None)."""
        return token_scopes.allows(self.scopes, "write", owner_name, normalized_name)

    def may_write_some_of(self, owner: Owner) -> bool:
        """Whether any environment of `owner` could be written with this token (checked before
        an upload's body names which one)."""
        if not self._user_reaches(owner):
            return False
        return token_scopes.writes_anything(self.scopes, owner.name)

    def may_write_anything(self) -> bool:
        """False for a read-only token: it can be refused before any body is read."""
        return token_scopes.writes_anything(self.scopes)

    def could_read_private(self, owner: Owner, normalized_name: str) -> bool:
        """Whether a private `owner/name` is visible to this caller (its owner's people, within
        the token's scopes), whether it exists or not: where it would not be, a missing name
        must be answered exactly like a private one."""
        return self._user_reaches(owner) and self.scope_reads(owner.name, normalized_name)

    def can_upload(self, owner: Owner, normalized_name: str | None) -> bool:
        """May publish to `owner` (to one environment when `normalized_name` is given)."""
        return self._user_reaches(owner) and self.scope_writes(owner.name, normalized_name)

    def reaches_all_of(self, owner: Owner, action: token_scopes.Action) -> bool:
        """May `action` on everything of `owner` (the owner's people, within a scope naming no
        single environment: `all`, `read` to read, `upload:OWNER`); what LoRA adapters need,
        which no environment's scope covers."""
        return self._user_reaches(owner) and token_scopes.allows(self.scopes, action, owner.name)

    def may_manage_tokens(self) -> bool:
        """May create tokens and revoke others (`registry_index.scopes.manages_tokens`)."""
        return token_scopes.manages_tokens(self.scopes)

    def upload_owner_names(self) -> list[str]:
        """Owners named by this token's upload scopes (for `/legacy/` without an owner)."""
        return token_scopes.upload_owners(self.scopes)


def authenticate(session: Session, token: str) -> Principal | None:
    """The principal for `token`, or None when it is unknown, revoked or its user disabled."""
    if not token.startswith(TOKEN_PREFIX):
        return None
    digest = hash_token(token)
    rows = session.exec(_BY_HASH, params={"digest": digest}).all()
    # The lookup is by a hash of the secret; compare again in constant time so no code path
    # ever branches on a partial match of attacker-controlled bytes.
    if not rows or not hmac.compare_digest(rows[0][0].token_hash, digest):
        return None
    return _principal(session, rows)


def _principal_statement(matches: Callable[[Any], sa.ColumnElement[bool]]) -> Any:
    """SQL: the token `matches` picks, its user and each owner the user acts for (their own,
    and their organisations'), a row per owner: one statement on every request.

    The memberships are a subquery of their own (on a second alias of the token table), run
    once, not once for every owner of the hub as a subquery correlated with the user would be.
    """
    member = aliased(ApiToken)
    memberships = (
        sa.select(col(Membership.owner_id))
        .join(member, col(member.user_id) == col(Membership.user_id))
        .where(matches(member))
    )
    return (
        select(ApiToken, User, Owner)
        .join(User, col(User.id) == col(ApiToken.user_id))
        .outerjoin(
            Owner, sa.or_(col(Owner.user_id) == col(User.id), col(Owner.id).in_(memberships))
        )
        .where(matches(ApiToken))
    )


_BY_HASH = _principal_statement(lambda token: col(token.token_hash) == sa.bindparam("digest"))
_BY_ID = _principal_statement(lambda token: col(token.id) == sa.bindparam("token_id"))


def principal_for_token_id(session: Session, token_id: str) -> Principal | None:
    """The principal acting through the token with this id (a web session cookie's), or None."""
    return _principal(session, session.exec(_BY_ID, params={"token_id": token_id}).all())


def _principal(session: Session, rows: Sequence[Any]) -> Principal | None:
    """The principal of `_principal_statement`'s rows, or None.

    Checked on every request, so revoking a token, disabling or deleting its user, or removing
    them from an organisation takes effect at once on every route.
    """
    if not rows:
        return None
    row, user = rows[0][0], rows[0][1]
    if row.revoked_at is not None:
        return None
    if user.disabled_at is not None or user.deleted_at is not None:
        return None
    owners = [owner for _, _, owner in rows if owner is not None]
    _note_use(session, row)
    return Principal(
        user=user,
        token=row,
        scopes=row.scopes.split(),
        owner_ids={owner.id for owner in owners},
        owners={owner.name: owner for owner in owners},
    )


def _note_use(session: Session, row: ApiToken) -> None:
    """Record when the token was last used (for `prime hub token list`), at most once a minute."""
    now = utcnow()
    last = row.last_used_at
    if last is not None and last.tzinfo is None:
        last = last.replace(tzinfo=now.tzinfo)
    if last is not None and now - last < _LAST_USED_RESOLUTION:
        return
    # Its own short transaction, once the request's session has given its connection back
    # (the read so far is ended): a request never holds two connections. One held beside the
    # other starved the pool at ~32 concurrent first requests of a token (issue 26). The
    # hub's sessions keep their objects on commit; the write's own session keeps a failure
    # (a full disk: the request goes on, a read still works) away from them.
    session.commit()
    try:
        with Session(session.get_bind()) as own:
            own.execute(
                sa.update(ApiToken).where(col(ApiToken.id) == row.id).values(last_used_at=now)
            )
            own.commit()
    except DBAPIError as error:
        if out_of_space(error) is None:
            raise
        return
    set_committed_value(row, "last_used_at", now)  # known, but not a pending change
