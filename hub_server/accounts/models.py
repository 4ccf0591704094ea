"""Account tables: users, owners (namespaces of users and organisations), memberships, API tokens.

No `from __future__ import annotations` in table modules: SQLModel reads relationship types
from the annotations at class creation.
"""

from datetime import datetime

from sqlmodel import Field, SQLModel

from hub_server.core.columns import EnumText
from hub_server.core.ids import new_id, utcnow
from registry_index.schemas.environments import OwnerKind


class User(SQLModel, table=True):
    """A person (or robot) who holds tokens; owns the namespace `Owner` of the same name."""

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    username: str = Field(index=True, unique=True, max_length=64)
    is_admin: bool = False
    created_at: datetime = Field(default_factory=utcnow)
    # A disabled user's tokens stop working at once; a deleted user is disabled for good, with
    # tokens revoked and memberships removed (their published files and runs stay: history).
    disabled_at: datetime | None = None
    deleted_at: datetime | None = None


class Owner(SQLModel, table=True):
    """A namespace `owner/…`: a user's own, or an organisation's."""

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    name: str = Field(index=True, unique=True, max_length=64)
    kind: OwnerKind = Field(sa_type=EnumText(OwnerKind, 8))
    user_id: str | None = Field(default=None, foreign_key="user.id", max_length=32, index=True)
    serial: int = 0  # bumped on every change to the owner's project list (index page cache)
    created_at: datetime = Field(default_factory=utcnow)


class Membership(SQLModel, table=True):
    """A user's membership in an organisation owner."""

    owner_id: str = Field(foreign_key="owner.id", primary_key=True, max_length=32)
    user_id: str = Field(foreign_key="user.id", primary_key=True, max_length=32, index=True)
    role: str = Field(default="member", max_length=16)


class ApiToken(SQLModel, table=True):
    """An API token; only its sha256 is stored, the secret is shown once at creation."""

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    user_id: str = Field(foreign_key="user.id", index=True, max_length=32)
    name: str = Field(max_length=128)
    token_hash: str = Field(index=True, unique=True, max_length=64)
    scopes: str = Field(default="all", max_length=2048)  # space-separated
    created_at: datetime = Field(default_factory=utcnow)
    last_used_at: datetime | None = None
    revoked_at: datetime | None = None


class WebSession(SQLModel, table=True):
    """A browser signed in with a token. The cookie carries a random secret (signed); the row
    holds its sha256, so signing out ends the session here, for every copy of the cookie."""

    id: str = Field(primary_key=True, max_length=64)  # sha256 hex of the cookie's secret
    token_id: str = Field(foreign_key="apitoken.id", index=True, max_length=32)
    created_at: datetime = Field(default_factory=utcnow)
    ended_at: datetime | None = None
