"""Who a token belongs to (`GET /api/v1/user/whoami`): `prime login` and `prime env push` read it."""

from __future__ import annotations

from pydantic import BaseModel


class TokenOut(BaseModel):
    name: str
    scopes: list[str]


class WhoAmI(BaseModel):
    id: str
    username: str
    is_admin: bool
    organizations: list[str]
    token: TokenOut
