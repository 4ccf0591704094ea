"""`GET /api/v1/environmentshub/`: list and search environments. Routes only: the work is
`search.service`, the rows become wire models in `registry.views`."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query

from hub_server.core.errors import BadRequest
from hub_server.http.deps import PrincipalDep, SessionDep
from hub_server.registry.views import summaries
from hub_server.search.service import EnvironmentQuery, SortField, search_environments
from registry_index.bounds import MAX_STORED_INT
from registry_index.schemas.envelope import Page
from registry_index.schemas.environments import EnvironmentSummary

router = APIRouter(prefix="/api/v1/environmentshub", tags=["environments"])


@router.get("/", response_model=Page[EnvironmentSummary], summary="List and search environments")
def list_environments(
    session: SessionDep,
    principal: PrincipalDep,
    search: str | None = None,
    tag: Annotated[list[str] | None, Query()] = None,
    owner: str | None = None,
    visibility: Literal["public", "private", "PUBLIC", "PRIVATE"] | None = None,
    mine: bool = False,
    sort: SortField = "updated_at",
    order: Literal["asc", "desc"] | None = None,
    page: Annotated[int, Query(ge=1, le=MAX_STORED_INT)] = 1,
    per_page: Annotated[int, Query(ge=1, le=100)] = 20,
) -> Page[EnvironmentSummary]:
    if mine and principal is None:
        raise BadRequest("mine=true needs an API token.")
    result = search_environments(
        session,
        principal,
        EnvironmentQuery(
            text=search or "",
            tags=tuple(tag or ()),
            owner=owner,
            visibility=visibility,
            mine=mine,
            sort=sort,
            order=order,
            page=page,
            per_page=per_page,
        ),
    )
    return Page(
        data=summaries(session, result.rows), total_count=result.total, page=page, per_page=per_page
    )
