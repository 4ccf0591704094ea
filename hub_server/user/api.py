"""`GET /api/v1/user/whoami`: who the token belongs to (used by `prime login` to check it)."""

from __future__ import annotations

from fastapi import APIRouter

from hub_server.accounts import service
from hub_server.http.deps import AuthDep, SessionDep
from registry_index.schemas.accounts import WhoAmI
from registry_index.schemas.envelope import Envelope

router = APIRouter(prefix="/api/v1/user", tags=["account"])


@router.get("/whoami", response_model=Envelope[WhoAmI])
def whoami(principal: AuthDep, session: SessionDep) -> Envelope[WhoAmI]:
    return Envelope(data=service.whoami(session, principal))
