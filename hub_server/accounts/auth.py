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
from dataclasses import dataclass, field

from sqlmodel import Session, select

from hub_server.accounts.models import ApiToken, Membership, Owner, User
from hub_server.registry.models import Environment
from registry_index import scopes as token_scopes

TOKEN_PREFIX = "phub_"


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


@dataclass
class Principal:
    """An authenticated caller: a user acting through one token."""

    user: User
    token: ApiToken
    scopes: list[str]
    owner_ids: set[str] = field(default_factory=set)  # owners the user belongs to

    def _user_reaches(self, owner: Owner) -> bool:
        return self.user.is_admin or owner.id in self.owner_ids

    def can_read(self, owner: Owner, env: Environment) -> bool:
        """Private environments are readable by their owner's people, within the scopes."""
        if env.visibility == "public":
            return True
        if not self._user_reaches(owner):
            return False
        return any(
            scope
            in ("all", "read", f"upload:{owner.name}", f"upload:{owner.name}/{env.normalized_name}")
            for scope in self.scopes
        )

    def can_upload(self, owner: Owner, normalized_name: str | None) -> bool:
        """May publish to `owner` (to one environment when `normalized_name` is given)."""
        if not self._user_reaches(owner):
            return False
        allowed = {"all", f"upload:{owner.name}"}
        if normalized_name is not None:
            allowed.add(f"upload:{owner.name}/{normalized_name}")
        return any(scope in allowed for scope in self.scopes)

    def upload_owner_names(self) -> list[str]:
        """Owners named by this token's upload scopes (for `/legacy/` without an owner)."""
        return token_scopes.upload_owners(self.scopes)


def authenticate(session: Session, token: str) -> Principal | None:
    """The principal for `token`, or None when it is unknown or revoked."""
    if not token.startswith(TOKEN_PREFIX):
        return None
    digest = hash_token(token)
    row = session.exec(select(ApiToken).where(ApiToken.token_hash == digest)).first()
    # The lookup is by a hash of the secret; compare again in constant time so no code path
    # ever branches on a partial match of attacker-controlled bytes.
    if row is None or not hmac.compare_digest(row.token_hash, digest):
        return None
    return principal_for_token(session, row)


def principal_for_token(session: Session, row: ApiToken) -> Principal | None:
    """The principal acting through the token `row` (found by hash, or by id from a signed
    web session), or None when the token is revoked or its user is gone."""
    if row.revoked_at is not None:
        return None
    user = session.get(User, row.user_id)
    if user is None:
        return None
    owner_ids = set(session.exec(select(Owner.id).where(Owner.user_id == user.id)).all())
    owner_ids.update(
        session.exec(select(Membership.owner_id).where(Membership.user_id == user.id)).all()
    )
    return Principal(user=user, token=row, scopes=row.scopes.split(), owner_ids=owner_ids)
