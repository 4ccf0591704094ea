"""The hub's run and compare pages for runs on this machine: `prime eval view RUN [RUN]`.

The same templates, sample rendering (`sample_view`: every message a block of the
conversation, traces as trees), histogram and filters as the hub's pages, served from records
handed in by the caller (the CLI reads the run directories) with no database and no hub: the
filters, paging and per-example means the hub runs in SQL run here over the records in memory.
The URLs are the hub's (`/OWNER/NAME/evals/ID`, `/OWNER/NAME/compare?a=&b=`), so the
templates' links work unchanged; a link to a hub-only page (an owner, a version) leads back to
the first page. Meant for loopback only: it has no accounts and serves whatever it was given.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import FastAPI, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles

from hub_server.evals.integrity import finite_score
from hub_server.evals.sample_index import HISTOGRAM_BINS, Bar, SampleFilter
from hub_server.web.charts import histogram_svg
from hub_server.web.evaluation_pages import (
    EXAMPLES_PER_PAGE,
    SAMPLES_PER_PAGE,
    compare_rows,
    metadata_rows,
    sample_query,
)
from hub_server.web.render import STATIC_DIR, build_templates
from hub_server.web.sample_view import sample_view
from registry_index.summary import Summary

templates = build_templates()
templates.env.globals["local_view"] = True


@dataclass
class LocalRun:
    """One run as the pages read it: its id, where its environment is, its records."""

    id: str
    owner: str
    name: str
    model_name: str
    env_version: str
    status: str
    created_at: str | None
    summary: Summary
    metadata: dict[str, Any]
    records: list[dict[str, Any]] = field(default_factory=list)

    @property
    def reward_mean(self) -> float | None:
        return self.summary.reward_mean


def _matches(record: dict[str, Any], wanted: SampleFilter) -> bool:
    error = record.get("error")
    error_type = (error.get("type") if isinstance(error, dict) else error) or None
    reward = None if error_type else finite_score(record.get("reward"))
    if wanted.reward_min is not None and (reward is None or reward < wanted.reward_min):
        return False
    if wanted.reward_max is not None and (reward is None or reward > wanted.reward_max):
        return False
    if wanted.error_type == "any" and error_type is None:
        return False
    if wanted.error_type not in (None, "any") and error_type != wanted.error_type:
        return False
    if wanted.stop_reason and record.get("stop_reason") != wanted.stop_reason:
        return False
    return wanted.example_index is None or record.get("example_index") == wanted.example_index


def _scored(records: Sequence[dict[str, Any]]) -> list[float]:
    return [
        value
        for r in records
        if not r.get("error") and (value := finite_score(r.get("reward"))) is not None
    ]


def reward_bars(records: Sequence[dict[str, Any]], bins: int = HISTOGRAM_BINS) -> list[Bar]:
    """The hub's histogram (`sample_index.reward_histogram`) over records in memory."""
    scores = _scored(records)
    if not scores:
        return []
    low, high = min(scores), max(scores)
    if high == low:
        return [Bar(low, high, len(scores))]
    width = (high - low) / bins
    counts = [0] * bins
    for value in scores:
        counts[min(int((value - low) / width), bins - 1)] += 1
    return [Bar(low + i * width, low + (i + 1) * width, counts[i]) for i in range(bins)]


def facets(records: Sequence[dict[str, Any]]) -> dict[str, list[tuple[str, int]]]:
    """The error types and stop reasons present, most frequent first (the filters' options)."""
    counts: dict[str, dict[str, int]] = {"error_type": {}, "stop_reason": {}}
    for record in records:
        error = record.get("error")
        kind = (error.get("type") if isinstance(error, dict) else error) or None
        for name, value in (("error_type", kind), ("stop_reason", record.get("stop_reason"))):
            if value:
                counts[name][str(value)] = counts[name].get(str(value), 0) + 1
    return {k: sorted(v.items(), key=lambda item: -item[1]) for k, v in counts.items()}


def example_means(run: LocalRun) -> dict[int, tuple[float | None, int, int]]:
    """Per example: (mean reward of its scored rollouts, scored count, errors)."""
    groups: dict[int, list[dict[str, Any]]] = {}
    for record in run.records:
        index = record.get("example_index")
        if isinstance(index, int):
            groups.setdefault(index, []).append(record)
    out = {}
    for index, records in groups.items():
        scores = _scored(records)
        mean = math.fsum(scores) / len(scores) if scores else None
        out[index] = (mean, len(scores), sum(1 for r in records if r.get("error")))
    return out


def _render(request: Request, template: str, status_code: int = 200, **context: Any) -> Response:
    return templates.TemplateResponse(request, template, context, status_code=status_code)


def viewer_app(runs: Sequence[LocalRun]) -> FastAPI:
    """The viewer of `runs` (one or two): `/` opens the run, or the comparison of two."""
    by_id = {run.id: run for run in runs}
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    def missing(request: Request, what: str) -> Response:
        return _render(request, "not_found.html", status_code=404, message=what)

    def comparison(
        request: Request, template: str, first: LocalRun, second: LocalRun, **context: Any
    ) -> Response:
        """A page of two runs, under the first's environment."""
        return _render(
            request,
            template,
            owner=first.owner,
            name=first.name,
            first=first,
            second=second,
            **context,
        )

    @app.get("/", response_class=HTMLResponse)
    def home() -> Response:
        first = runs[0]
        if len(runs) == 2:
            query = urlencode({"a": first.id, "b": runs[1].id})
            return RedirectResponse(f"/{first.owner}/{first.name}/compare?{query}")
        return RedirectResponse(f"/{first.owner}/{first.name}/evals/{first.id}")

    @app.get("/{owner}/{name}/evals/{run_id}", response_class=HTMLResponse)
    def run_page(
        request: Request,
        run_id: str,
        reward_min: Annotated[str, Query(max_length=32)] = "",
        reward_max: Annotated[str, Query(max_length=32)] = "",
        error: Annotated[str, Query(max_length=128)] = "",
        stop: Annotated[str, Query(max_length=64)] = "",
        example: Annotated[int | None, Query(ge=0)] = None,
        page_number: Annotated[int, Query(alias="page", ge=1)] = 1,
    ) -> Response:
        run = by_id.get(run_id)
        if run is None:
            return missing(request, f"No run {run_id!r} in this viewer.")
        wanted, filters, pager_query = sample_query(reward_min, reward_max, error, stop, example)
        matching = [r for r in run.records if _matches(r, wanted)]
        start = (page_number - 1) * SAMPLES_PER_PAGE
        return _render(
            request,
            "evaluation.html",
            owner=run.owner,
            name=run.name,
            run={
                "id": run.id,
                "name": run.id,
                "model_name": run.model_name,
                "env_version": run.env_version,
                "status": run.status,
                "created_at": run.created_at,
                "finalized_at": None,
                "sample_count": len(run.records),
                "verification": None,
                "verification_detail": None,
                "summary": run.summary,
            },
            metadata=metadata_rows(run.metadata),
            histogram=histogram_svg(reward_bars(run.records), label="Scored samples by reward"),
            facets=facets(run.records),
            filters=filters,
            samples=[sample_view(r) for r in matching[start : start + SAMPLES_PER_PAGE]],
            total=len(matching),
            page=page_number,
            pages=max(1, math.ceil(len(matching) / SAMPLES_PER_PAGE)),
            pager_query=pager_query,
            others=[
                {"id": o.id, "model": f"{o.model_name} ({o.id})"} for o in runs if o is not run
            ],
        )

    @app.get("/{owner}/{name}/evals/{run_id}/samples.jsonl")
    def samples(run_id: str) -> Response:
        run = by_id.get(run_id)
        if run is None:
            return Response(f"No run {run_id!r} in this viewer.\n", status_code=404)

        def lines() -> Iterator[bytes]:
            for record in run.records:
                yield (json.dumps(record, ensure_ascii=False) + "\n").encode()

        return StreamingResponse(lines(), media_type="application/x-ndjson")

    @app.get("/{owner}/{name}/compare", response_class=HTMLResponse)
    def compare(
        request: Request,
        a: Annotated[str, Query(max_length=64)] = "",
        b: Annotated[str, Query(max_length=64)] = "",
        page_number: Annotated[int, Query(alias="page", ge=1)] = 1,
    ) -> Response:
        first, second = by_id.get(a), by_id.get(b)
        if first is None or second is None:
            return missing(request, "Compare two runs of this viewer: ?a=RUN_ID&b=RUN_ID.")
        left, right = example_means(first), example_means(second)
        examples = sorted(set(left) | set(right))
        start = (page_number - 1) * EXAMPLES_PER_PAGE
        return comparison(
            request,
            "compare.html",
            first,
            second,
            rows=compare_rows(examples[start : start + EXAMPLES_PER_PAGE], left, right),
            page=page_number,
            pages=max(1, math.ceil(len(examples) / EXAMPLES_PER_PAGE)),
            pager_query=lambda number: urlencode({"a": a, "b": b, "page": number}),
        )

    @app.get("/{owner}/{name}/compare/{example}", response_class=HTMLResponse)
    def compare_example(
        request: Request,
        example: int,
        a: Annotated[str, Query(max_length=64)] = "",
        b: Annotated[str, Query(max_length=64)] = "",
    ) -> Response:
        """One example's rollouts of both runs in two columns, as conversations."""
        first, second = by_id.get(a), by_id.get(b)
        if first is None or second is None:
            return missing(request, "Compare two runs of this viewer: ?a=RUN_ID&b=RUN_ID.")

        def shown(run: LocalRun) -> list[dict[str, Any]]:
            wanted = SampleFilter(example_index=example)
            return [sample_view(r) for r in run.records if _matches(r, wanted)][:SAMPLES_PER_PAGE]

        return comparison(
            request,
            "compare_example.html",
            first,
            second,
            example=example,
            left=shown(first),
            right=shown(second),
        )

    @app.get("/{path:path}", include_in_schema=False)
    def elsewhere() -> Response:
        """A hub-only page (an owner, an environment, a version): back to the first page."""
        return RedirectResponse("/")

    return app
