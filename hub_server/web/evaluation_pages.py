"""Evaluation pages: a run's metadata and summary, a reward histogram, the samples viewer
(filters by reward range, error type and stop reason; server-side paging), a JSONL download,
and an example-by-example comparison of two runs of one environment.

Filtering and paging run in SQL over `evals.sample_index`; only the batches holding the shown
page are decompressed, so a 100,000-sample run pages as fast as a small one.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from sqlmodel import Session

from hub_server.accounts.auth import Principal
from hub_server.accounts.models import Owner
from hub_server.core.errors import HubError
from hub_server.evals import service
from hub_server.evals.integrity import stored_json
from hub_server.evals.models import Evaluation
from hub_server.evals.sample_index import (
    SampleFilter,
    ensure_indexed,
    example_indexes,
    example_means,
    page_of_samples,
    run_overview,
)
from hub_server.http.deps import HubDep, SessionDep
from hub_server.index import api as index_routes
from hub_server.registry.models import Environment
from hub_server.web.charts import histogram_svg
from hub_server.web.pages import not_found_page, page
from hub_server.web.sample_view import sample_view
from hub_server.web.session import WebPrincipalDep
from registry_index.bounds import MAX_STORED_INT
from registry_index.summary import Summary

router = APIRouter(include_in_schema=False)

SAMPLES_PER_PAGE = 20
EXAMPLES_PER_PAGE = 50
_SHOWN_METADATA = 40


def _run(
    session: Session, principal: Principal | None, owner: str, name: str, evaluation_id: str
) -> tuple[Owner, Environment, Evaluation]:
    env, evaluation = service.evaluation_on(session, principal, owner, name, evaluation_id)
    return env.owner, env, evaluation


def metadata_rows(metadata: dict[str, Any]) -> list[tuple[str, str]]:
    """A run's metadata as label/value pairs (nested values as compact JSON), bounded."""
    rows = []
    for key, value in list(metadata.items())[:_SHOWN_METADATA]:
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        rows.append((str(key)[:100], shown[:500]))  # a key is as free-form as a value
    return rows


def _float(value: str) -> float | None:
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def sample_query(
    reward_min: str, reward_max: str, error: str, stop: str, example: int | None
) -> tuple[SampleFilter, dict[str, str], Callable[[int], str]]:
    """The run page's query as a filter, the filter form's values and the pager's links.

    Shared by the hub's run page and the local viewer, which read the same query.
    """
    wanted = SampleFilter(
        reward_min=_float(reward_min),
        reward_max=_float(reward_max),
        error_type=error or None,
        stop_reason=stop or None,
        example_index=example,
    )
    filters = {
        "reward_min": reward_min,
        "reward_max": reward_max,
        "error": error,
        "stop": stop,
        "example": "" if example is None else str(example),
    }

    def pager_query(number: int) -> str:
        return urlencode({**{k: v for k, v in filters.items() if v}, "page": number})

    return wanted, filters, pager_query


Means = dict[int, tuple[float | None, int, int]]


def compare_rows(examples: Iterable[int], left: Means, right: Means) -> list[dict[str, Any]]:
    """One row per example of two runs: each run's (mean, scored, errors) and the difference."""
    rows = []
    for index in examples:
        mean_a, mean_b = left.get(index, (None, 0, 0)), right.get(index, (None, 0, 0))
        diff = None if mean_a[0] is None or mean_b[0] is None else mean_b[0] - mean_a[0]
        rows.append({"example": index, "a": mean_a, "b": mean_b, "diff": diff})
    return rows


@router.get("/{owner}/{name}/evals/{evaluation_id}", response_class=HTMLResponse)
def evaluation_page(
    owner: str,
    name: str,
    evaluation_id: str,
    request: Request,
    hub: HubDep,
    session: SessionDep,
    principal: WebPrincipalDep,
    reward_min: Annotated[str, Query(max_length=32)] = "",
    reward_max: Annotated[str, Query(max_length=32)] = "",
    error: Annotated[str, Query(max_length=128)] = "",
    stop: Annotated[str, Query(max_length=64)] = "",
    example: Annotated[int | None, Query(ge=0, le=MAX_STORED_INT)] = None,
    page_number: Annotated[int, Query(alias="page", ge=1, le=1_000_000)] = 1,
) -> Response:
    if name == "files":
        # `/{owner}/files/evals/{filename}` is a download from a project named "evals"; this
        # router is matched before the index's, so hand the request to the index route.
        return index_routes.download(
            owner, "evals", evaluation_id, request, hub, session, principal
        )
    try:
        own, env, evaluation = _run(session, principal, owner, name, evaluation_id)
    except HubError as exc:
        return not_found_page(request, exc.message)
    wanted, filters, pager_query = sample_query(reward_min, reward_max, error, stop, example)
    shown = page_of_samples(session, hub.store, evaluation, wanted, page_number, SAMPLES_PER_PAGE)
    pages = max(1, math.ceil(shown.total / SAMPLES_PER_PAGE))
    overview = run_overview(session, evaluation)
    others = service.other_runs(session, principal, evaluation, limit=20)
    return page(
        request,
        "evaluation.html",
        owner=own.name,
        name=env.name,
        run={
            "id": evaluation.id,
            "name": evaluation.name,
            "model_name": evaluation.model_name,
            "env_version": evaluation.env_version,
            "status": evaluation.status,
            "created_at": evaluation.created_at,
            "finalized_at": evaluation.finalized_at,
            "sample_count": evaluation.sample_count,
            "verification": evaluation.verification,
            "verification_detail": evaluation.verification_detail,
            "summary": service.summary_of(evaluation) or Summary(),
        },
        metadata=metadata_rows(stored_json(evaluation.metadata_json, {})),
        histogram=histogram_svg(overview.bars, label="Scored samples by reward"),
        facets=overview.facets,
        filters=filters,
        samples=[sample_view(record) for record in shown.samples],
        total=shown.total,
        page=page_number,
        pages=pages,
        pager_query=pager_query,
        others=[{"id": i, "model": m} for i, m in others],
    )


@router.get("/{owner}/{name}/evals/{evaluation_id}/samples.jsonl")
def download_samples(
    owner: str,
    name: str,
    evaluation_id: str,
    hub: HubDep,
    session: SessionDep,
    principal: WebPrincipalDep,
) -> Response:
    """Every sample of the run as JSON Lines, streamed batch by batch."""
    try:
        _, _, evaluation = _run(session, principal, owner, name, evaluation_id)
    except HubError as exc:
        return Response(exc.message + "\n", status_code=404, media_type="text/plain")
    batches = list(evaluation.batches)
    store = hub.store

    def lines() -> Iterator[bytes]:
        for record in service.iter_samples(store, batches):
            yield (json.dumps(record, ensure_ascii=False) + "\n").encode()

    filename = f"{evaluation.id}.jsonl"
    return StreamingResponse(
        lines(),
        media_type="application/x-ndjson",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )


@router.get("/{owner}/{name}/compare", response_class=HTMLResponse)
def compare_runs(
    owner: str,
    name: str,
    request: Request,
    hub: HubDep,
    session: SessionDep,
    principal: WebPrincipalDep,
    a: Annotated[str, Query(max_length=64)] = "",
    b: Annotated[str, Query(max_length=64)] = "",
    page_number: Annotated[int, Query(alias="page", ge=1, le=100_000)] = 1,
) -> Response:
    """Two runs of one environment side by side, example by example (mean reward of each)."""
    if name == "simple":  # `/{owner}/simple/compare` is the index's page of a project "compare"
        return RedirectResponse(f"/{owner}/simple/compare/", status_code=301)
    try:
        own, env, first = _run(session, principal, owner, name, a)
        _, _, second = _run(session, principal, owner, name, b)
    except HubError as exc:
        return not_found_page(request, exc.message)
    for run in (first, second):
        ensure_indexed(session, hub.store, run)
    examples, total = example_indexes(
        session, [first.id, second.id], page_number, EXAMPLES_PER_PAGE
    )
    left, right = (
        example_means(session, first.id, examples),
        example_means(session, second.id, examples),
    )
    rows = compare_rows(examples, left, right)
    pages = max(1, math.ceil(total / EXAMPLES_PER_PAGE))
    return page(
        request,
        "compare.html",
        owner=own.name,
        name=env.name,
        first=first,
        second=second,
        rows=rows,
        page=page_number,
        pages=pages,
        pager_query=lambda number: urlencode({"a": a, "b": b, "page": number}),
    )
