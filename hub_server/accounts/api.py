"""`GET /api/v1/user/whoami`: who the token belongs to (used by `prime login` to check it)."""

from __future__ import annotations

from fastapi import APIRouter
from sqlmodel import col, select

from hub_server.accounts.models import Owner
from hub_server.http.deps import AuthDep, SessionDep
from registry_index.schemas.accounts import TokenOut, WhoAmI
from registry_index.schemas.envelope import Envelope
from registry_index.schemas.environments import OwnerKind

router = APIRouter(prefix="/api/v1/user", tags=["account"])


@router.get("/whoami", response_model=Envelope[WhoAmI])
def whoami(principal: AuthDep, session: SessionDep) -> Envelope[WhoAmI]:
    orgs = session.exec(
        select(Owner.name).where(
            Owner.kind == OwnerKind.ORG, col(Owner.id).in_(principal.owner_ids)
        )
    ).all()
    return Envelope(
        data=WhoAmI(
            id=principal.user.id,
            username=principal.user.username,
            is_admin=principal.user.is_admin,
            organizations=sorted(orgs),
            token=TokenOut(name=principal.token.name, scopes=principal.scopes),
        )
    )
