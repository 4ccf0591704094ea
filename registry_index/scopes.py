"""Token scopes: what a hub token may do. One rule for the hub's checks and the CLI's early refusal.

- `all`: everything the user may do;
- `read`: read everything the user may read (private environments of their owners);
- `upload:OWNER`: publish, yank and edit any environment of OWNER (and read them);
- `upload:OWNER/NAME`: the same for one environment;
- `train`: train on the hub's Lab (the Tinker API at `/lab`) as the user, nothing else;
- managing the user's tokens (create, revoke another) takes `all`: a narrower token could
  otherwise mint a broader one, or revoke the tokens that hold more than it does.

A scope only narrows what the user may do: whether the user belongs to the owner at all is
the hub's question (membership), not the token's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from registry_index.names import is_valid_owner_name, is_valid_project_name, normalize

Action = Literal["read", "write"]
_HOW = "use 'all', 'read', 'train', 'upload:OWNER' or 'upload:OWNER/NAME'"


@dataclass(frozen=True)
class Scope:
    """A parsed scope; `owner` and `name` (normalised) are set only for upload scopes."""

    kind: Literal["all", "read", "train", "upload"]
    owner: str | None = None
    name: str | None = None

    def __str__(self) -> str:
        if self.kind != "upload":
            return self.kind
        return f"upload:{self.owner}" + (f"/{self.name}" if self.name else "")

    def allows(self, action: Action, owner: str, name: str | None = None) -> bool:
        """May this scope do `action` on environment `owner/name`, or, when `name` is None, on
        every environment of `owner`?"""
        if self.kind == "all":
            return True
        if self.kind == "read":
            return action == "read"
        if self.kind == "train":
            return False
        if self.owner != owner.lower():
            return False
        return self.name is None or (name is not None and self.name == normalize(name))


def parse_scope(text: str) -> Scope:
    """`all`, `read`, `upload:OWNER` or `upload:OWNER/NAME` as a Scope; ValueError otherwise."""
    if text in ("all", "read", "train"):
        return Scope(text)  # type: ignore[arg-type]
    if text.startswith("upload:"):
        owner, slash, name = text.removeprefix("upload:").partition("/")
        if is_valid_owner_name(owner) and (not slash or is_valid_project_name(name)):
            return Scope("upload", owner, normalize(name) if slash else None)
    raise ValueError(f"Unknown scope {text!r}; {_HOW}.")


def canonical_scopes(scopes: Iterable[str]) -> list[str]:
    """Scopes as stored (names normalised); `all` when none is given. ValueError on junk."""
    return [str(parse_scope(scope)) for scope in scopes] or ["all"]


def allows(scopes: Iterable[str], action: Action, owner: str, name: str | None = None) -> bool:
    """True when any of `scopes` allows `action` on `owner/name` (see `Scope.allows`)."""
    return any(parse_scope(scope).allows(action, owner, name) for scope in scopes)


def writes_anything(scopes: Iterable[str], owner: str | None = None) -> bool:
    """False for read-only scopes (or, given `owner`, for scopes that write none of `owner`'s
    environments): such a token can be refused before an upload's body is read."""
    for scope in map(parse_scope, scopes):
        if scope.kind == "all" or (
            scope.kind == "upload" and (owner is None or scope.owner == owner.lower())
        ):
            return True
    return False


def manages_tokens(scopes: Iterable[str]) -> bool:
    """May create the user's tokens and revoke any of them (only `all`; any token may revoke
    itself, which only takes away)."""
    return any(parse_scope(scope).kind == "all" for scope in scopes)


def trains(scopes: Iterable[str]) -> bool:
    """May use the Lab (train LoRA adapters on the hub): `all` or `train`."""
    return any(parse_scope(scope).kind in ("all", "train") for scope in scopes)


def upload_owners(scopes: Iterable[str]) -> list[str]:
    """Owners named by upload scopes (for a twine upload that does not say which owner)."""
    return sorted({s.owner for s in map(parse_scope, scopes) if s.owner is not None})
