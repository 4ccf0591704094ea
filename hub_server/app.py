"""The hub's FastAPI application factory.

`create_app(settings)` migrates the database, opens the blob store (dropping temp files a
crash may have left, and expired upload reservations) and mounts the routers, the package
index last: its `/{owner}/…` routes would match the others' paths.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError
from starlette.concurrency import run_in_threadpool

from hub_server.admin import open_database
from hub_server.core import log_redaction
from hub_server.core.blobstore import BlobStore
from hub_server.core.errors import HubError
from hub_server.core.out_of_space import out_of_space
from hub_server.core.settings import HubSettings
from hub_server.core.upkeep import periodic
from hub_server.evals import verification
from hub_server.evals.service import mark_abandoned
from hub_server.http.limits import RequestLimitsMiddleware
from hub_server.http.ratelimit import SlidingWindowLimiter
from hub_server.http.security_headers import SecurityHeadersMiddleware
from hub_server.http.state import Hub
from hub_server.index.download_counts import DownloadCounter
from hub_server.registry.pending_uploads import purge_expired
from hub_server.routes import base_app
from registry_index.schemas.errors import ErrorBody

if TYPE_CHECKING:
    from hub_server.lab.engine import LabEngine
    from hub_server.lab.service import LabLimits

log = logging.getLogger(__name__)


def create_app(
    settings: HubSettings | None = None,
    lab: LabEngine | None = None,
    lab_limits: LabLimits | None = None,
) -> FastAPI:
    """A ready hub for `settings` (default: from `PRIME_HUB_*` environment variables); with
    `lab`, an engine that trains and samples, it serves the Lab at `/lab` (docs/lab.md)."""
    settings = settings or HubSettings.from_env()
    engine = open_database(settings)
    store = BlobStore(settings.resolved_storage_url, settings.s3_endpoint_url)
    lab_service = None
    if lab is not None:
        from hub_server.lab.service import open_lab

        lab_service = open_lab(lab, engine, store, lab_limits)
    purge_expired(engine, store)
    log_redaction.install()
    jobs = [
        partial(purge_expired, engine, store),
        partial(mark_abandoned, engine, settings.eval_abandon_after_seconds),
    ]

    downloads = DownloadCounter()
    count_downloads = partial(downloads.flush, engine)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        worker = (
            asyncio.create_task(verification.run_worker(engine, store, settings))
            if verification.enabled(settings)
            else None
        )
        try:
            async with (
                periodic(settings.sweep_interval_seconds, jobs),
                periodic(settings.download_count_interval_seconds, [count_downloads]),
            ):
                try:
                    yield
                finally:
                    await run_in_threadpool(count_downloads)
        finally:
            if worker is not None:
                worker.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await worker
            if lab_service is not None:
                await run_in_threadpool(lab_service.close)

    app = base_app(
        title="Environments Hub",
        version="1",
        description="Publish, install and evaluate LLM environments; see docs/api.md.",
        lifespan=lifespan,
    )
    # Bounds every request (auth, body size) before a route can read its body.
    app.add_middleware(RequestLimitsMiddleware)
    # Outermost: the answers the limits give before any route carry the headers too.
    app.add_middleware(SecurityHeadersMiddleware)
    app.state.hub = Hub(
        settings=settings,
        engine=engine,
        store=store,
        upload_limiter=SlidingWindowLimiter(settings.uploads_per_minute),
        login_limiter=SlidingWindowLimiter(settings.failed_logins_per_minute),
        downloads=downloads,
    )
    app.state.lab = lab_service

    @app.exception_handler(HubError)
    async def _hub_error(_request: Request, error: HubError) -> JSONResponse:
        body = ErrorBody(detail=error.message)
        return JSONResponse(body.model_dump(), error.status, headers=error.headers)

    @app.exception_handler(OSError)
    @app.exception_handler(DBAPIError)
    async def _storage_error(_request: Request, error: Exception) -> JSONResponse:
        full = out_of_space(error)
        if full is None:
            raise error  # any other failure stays a 500, logged with its traceback
        log.warning("refused a request: out of storage space (%s)", error)
        return JSONResponse(ErrorBody(detail=full.message).model_dump(), full.status, full.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, error: RequestValidationError) -> JSONResponse:
        problems = "; ".join(
            ": ".join(
                part
                for part in (
                    ".".join(str(p) for p in e["loc"] if p != "body"),
                    str(e["msg"]).removeprefix("Value error, "),
                )
                if part
            )
            for e in error.errors()
        )
        return JSONResponse(ErrorBody(detail=f"Invalid request: {problems}").model_dump(), 400)

    return app
