"""Every route the hub serves, in the order they match, and the owner names they reserve.

An owner is the first segment of its paths (`/{owner}/simple/`, `/{owner}/{name}`), so a user
or organisation named after a word of the hub's own routes (`api`, `legacy`, `simple`,
`files`, `login`, `docs`, …) would shadow them or be shadowed. The reserved names are read off
the routes themselves (`reserved_owner_names`), so a route added later reserves its words too.
"""

from __future__ import annotations

from functools import cache

from fastapi import APIRouter, FastAPI
from fastapi_offline import FastAPIOffline

from hub_server.adapters import api as adapters_api
from hub_server.evals import api as evals_api
from hub_server.index import api as index_api
from hub_server.index import upload_api
from hub_server.lab import api as lab_api
from hub_server.registry import api as environments_api
from hub_server.registry import push_api
from hub_server.search import api as search_api
from hub_server.user import api as account_api
from hub_server.web import account_pages, environment_pages, evaluation_pages, listing_pages

DOCS_ASSETS = "/docs-assets"
HEALTH = "/healthz"

ROUTERS: tuple[APIRouter, ...] = (
    upload_api.router,
    account_api.router,
    push_api.router,
    search_api.router,
    environments_api.router,
    lab_api.router,
    adapters_api.router,
    # The web pages before the package index: both claim paths under /{owner}/.
    evals_api.router,
    account_pages.router,
    listing_pages.router,
    environment_pages.router,
    evaluation_pages.router,
    index_api.router,  # last: its /{owner}/… routes match almost anything
)


def base_app(**options: object) -> FastAPI:
    """The app with every route and nothing else (`create_app` adds state and middleware).
    FastAPIOffline: /docs and /redoc load their scripts and styles from the hub, not a CDN."""
    app = FastAPIOffline(static_url=DOCS_ASSETS, **options)  # type: ignore[arg-type]

    @app.get(HEALTH, include_in_schema=False)
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    for router in ROUTERS:
        app.include_router(router)
    return app


@cache
def reserved_owner_names() -> frozenset[str]:
    """Each literal segment of any route's path (lower-cased), parameters left out."""
    paths = [getattr(route, "path", "") for route in base_app().routes]
    paths += [getattr(route, "path", "") for router in ROUTERS for route in router.routes]
    return frozenset(
        segment.lower()
        for path in paths
        for segment in path.split("/")
        if segment and "{" not in segment
    )
