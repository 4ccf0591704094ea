"""Server-rendered listing pages: the home page (search, tags, sort, paging), owner pages (with
the owner's LoRA adapters the caller may read), and the pages' own static files. Environment pages live in `environment_pages`, run pages in
`evaluation_pages`, sign-in in `account_pages`.

The pages apply exactly the API's visibility rule (a private environment is a 404 page for
anyone who may not read it) and read through the same query as the API, so a page can never
show something the API would hide. The app includes the web routers before the package-index
routes; the pages' paths never end in a slash, so `/{owner}/simple/` and `/{owner}/files/…`
never reach them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import FileResponse, HTMLResponse
from sqlmodel import Session

from hub_server.accounts import service as accounts
from hub_server.accounts.auth import Principal
from hub_server.accounts.models import Owner
from hub_server.accounts.service import find_owner
from hub_server.adapters.service import list_adapters
from hub_server.core.errors import NotFound
from hub_server.http.deps import SessionDep
from hub_server.registry.models import Environment
from hub_server.registry.views import summaries
from hub_server.search.service import EnvironmentQuery, SortField, search_environments
from hub_server.web.environment_pages import RESERVED_FIRST_SEGMENTS
from hub_server.web.pages import not_found_page, page
from hub_server.web.render import STATIC_DIR
from hub_server.web.session import WebPrincipalDep
from registry_index.schemas.adapters import AdapterSummary

router = APIRouter(include_in_schema=False)

PER_PAGE = 24
# First path segments that belong to the API, the index or static files, never to an owner.


_STATIC_FILES = {path.name: path for path in STATIC_DIR.iterdir() if path.is_file()}


@router.get("/static/{filename}", name="hub_static")
def static_file(filename: str) -> FileResponse:
    """The pages' own assets, served by name from a fixed list (no path ever built from input)."""
    path = _STATIC_FILES.get(filename)
    if path is None:
        raise NotFound(f"No static file {filename!r}.")
    return FileResponse(path, headers={"Cache-Control": "public, max-age=3600"})


def _page(request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    return page(request, template, status_code=status_code, **context)


def _cards(session: Session, pairs: list[tuple[Environment, Owner]]) -> list[dict[str, Any]]:
    return [
        {
            "owner": item.owner.name,
            "name": item.name,
            "description": item.description,
            "tags": item.tags,
            "latest_version": item.latest_version,
            "downloads": item.downloads,
        }
        for item in summaries(session, pairs)
    ]


_SORTS: dict[SortField, str] = {
    "updated_at": "Recently updated",
    "name": "Name",
    "evaluations": "Most evaluated",
    "downloads": "Most downloaded",
    "relevance": "Best match",
}


def _listing(
    request: Request,
    session: Session,
    principal: Principal | None,
    template: str,
    listing: ListingQuery,
    *,
    owner: Owner | None = None,
    people: list[str] | None = None,
    adapters: list[AdapterSummary] | None = None,
) -> HTMLResponse:
    q, tags, sort, page = listing.q, listing.tag or [], listing.sort, listing.page
    default: SortField = "relevance" if q.strip() else "updated_at"
    chosen = next((field for field in _SORTS if field == sort), default)
    result = search_environments(
        session,
        principal,
        EnvironmentQuery(
            text=q.strip(),
            tags=tuple(t.strip() for t in tags if t.strip()),
            owner=owner.name if owner else None,
            sort=chosen,
            page=page,
            per_page=PER_PAGE,
        ),
    )
    pages = max(1, math.ceil(result.total / PER_PAGE))
    clean_tags = [t.strip() for t in tags if t.strip()]

    def listing_query(**changes: Any) -> str:
        values: dict[str, Any] = {"q": q, "tag": clean_tags, "sort": sort, "page": page}
        values.update(changes)
        pairs = [
            (key, item)
            for key, value in values.items()
            for item in (value if isinstance(value, list) else [value])
            if item not in ("", None) and not (key == "page" and item == 1)
        ]
        return urlencode(pairs)

    return _page(
        request,
        template,
        environments=_cards(session, result.rows),
        total=result.total,
        query=q,
        tags=clean_tags,
        tag=clean_tags[0] if len(clean_tags) == 1 else "",
        sort=chosen,
        sorts=_SORTS,
        page=page,
        pages=pages,
        pager_query=lambda number: listing_query(page=number),
        listing_query=listing_query,
        owner=owner.name if owner else None,
        owner_kind=owner.kind if owner else None,
        people=people or [],
        adapters=adapters or [],
    )


@dataclass
class ListingQuery:
    """The listing pages' query string: text, tags (repeatable), sort and page."""

    q: Annotated[str, Query(max_length=200)] = ""
    tag: Annotated[list[str] | None, Query(max_length=64)] = None
    sort: Annotated[str, Query(max_length=20)] = ""
    page: Annotated[int, Query(ge=1, le=10_000)] = 1


ListingDep = Annotated[ListingQuery, Depends()]


@router.get("/", response_class=HTMLResponse)
def home(
    request: Request, session: SessionDep, principal: WebPrincipalDep, listing: ListingDep
) -> HTMLResponse:
    return _listing(request, session, principal, "index.html", listing)


@router.get("/{owner}", response_class=HTMLResponse)
def owner_page(
    owner: str,
    request: Request,
    session: SessionDep,
    principal: WebPrincipalDep,
    listing: ListingDep,
) -> HTMLResponse:
    found = None if owner in RESERVED_FIRST_SEGMENTS else find_owner(session, owner)
    if found is None:
        return not_found_page(request, f"There is no user or organisation named {owner!r}.")
    adapters, _total = list_adapters(session, principal, found.name, 1, PER_PAGE)
    return _listing(
        request,
        session,
        principal,
        "owner.html",
        listing,
        owner=found,
        people=accounts.people_of(session, found),
        adapters=adapters,
    )
