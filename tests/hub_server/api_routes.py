"""The hub app's API routes, for the tests that check a rule over every route (bounds, schemas)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from fastapi.routing import APIRoute


def api_routes(routes: list[Any]) -> Iterator[APIRoute]:
    """Every API route of `routes`, those of included routers too (FastAPI keeps them per router)."""
    for route in routes:
        if isinstance(route, APIRoute):
            yield route
        elif hasattr(route, "original_router"):
            yield from api_routes(route.original_router.routes)
