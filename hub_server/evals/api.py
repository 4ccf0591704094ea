"""HTTP routes of the evaluations API (`/api/v1/evaluations/…` and the leaderboard).

Bodies are read and parsed here rather than by FastAPI's model binding so that a batch is
size-checked while it streams in (413 before anything is parsed) and every refusal is one
readable `{"detail": …}` sentence, as the rest of the hub answers.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ValidationError

from hub_server.core.errors import BadRequest, TooLarge
from hub_server.evals import service
from hub_server.evals.integrity import IntegrityError, loads_strict
from hub_server.evals.leaderboard import leaderboard
from hub_server.evals.models import EvaluationStatus
from hub_server.evals.samples import MAX_BATCH_BYTES
from hub_server.http.deps import AuthDep, HubDep, PrincipalDep, SessionDep, check_upload_rate
from registry_index.bounds import MAX_STORED_INT
from registry_index.schemas.envelope import Envelope, Page
from registry_index.schemas.evals import (
    BatchAccepted,
    CreateEvaluation,
    EvaluationEnvelope,
    EvaluationInfo,
    FinalizeEvaluation,
)
from registry_index.schemas.leaderboard import Leaderboard

router = APIRouter(prefix="/api/v1", tags=["evaluations"])

_CREATE_BODY_LIMIT = 1024 * 1024
M = TypeVar("M", bound=BaseModel)


async def _read_json(
    request: Request, limit: int, *, empty_ok: bool = False, max_depth: int = 64
) -> Any:
    """The JSON body, refusing more than `limit` bytes (413) and unparseable bytes (400)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise TooLarge(_too_large(int(declared), limit))
    received = bytearray()
    async for chunk in request.stream():
        received.extend(chunk)
        if len(received) > limit:
            raise TooLarge(_too_large(len(received), limit))
    if not received.strip():
        if empty_ok:
            return {}
        raise BadRequest("The request body is empty; send a JSON object.")
    try:
        return loads_strict(received, max_depth)
    except IntegrityError as exc:
        raise BadRequest(f"The request body is refused: {exc}.") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadRequest(f"The request body is not valid JSON: {exc}.") from None


def _too_large(size: int, limit: int) -> str:
    return (
        f"The request body is {size} bytes; at most {limit} bytes are accepted per request. "
        "Split the samples into smaller batches."
    )


def _parse(model: type[M], body: Any) -> M:
    if not isinstance(body, dict):
        raise BadRequest("The request body must be a JSON object.")
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "body"
        message = first["msg"].removeprefix("Value error, ")
        raise BadRequest(f"{where}: {message}.") from None


@router.post("/evaluations/", summary="Create an evaluation linked to an exact environment version")
async def create(
    request: Request, hub: HubDep, session: SessionDep, principal: AuthDep
) -> EvaluationEnvelope:
    """Body: `CreateEvaluation`. `evaluation_id` is also top-level, where the stock `prime` reads it."""
    body = _parse(CreateEvaluation, await _read_json(request, _CREATE_BODY_LIMIT))
    key = request.headers.get("idempotency-key")
    if key and not body.client_run_id:
        body.client_run_id = key[:128]
    check_upload_rate(request, hub, principal)
    evaluation = service.create_evaluation(session, body, principal)
    return EvaluationEnvelope(
        evaluation_id=evaluation.id, data=service.evaluation_info(session, evaluation)
    )


@router.post("/evaluations/{evaluation_id}/samples", summary="Push one batch of samples")
async def push_samples(
    evaluation_id: str, request: Request, hub: HubDep, session: SessionDep, principal: AuthDep
) -> Envelope[BatchAccepted]:
    """Body `{"samples": [rollout record, …]}`, at most 100,000 samples and 32 MiB per batch."""
    body = await _read_json(request, MAX_BATCH_BYTES, max_depth=hub.settings.max_sample_depth)
    if not isinstance(body, dict) or "samples" not in body:
        raise BadRequest('The body must be {"samples": [ {…rollout record…}, … ]}.')
    batch = service.append_samples(session, hub.store, evaluation_id, principal, body["samples"])
    return Envelope(
        data=BatchAccepted(
            evaluation_id=evaluation_id,
            accepted=batch.sample_count,
            batch=batch.seq,
            sample_count=service.sample_count(session, evaluation_id),
        )
    )


@router.post(
    "/evaluations/{evaluation_id}/finalize", summary="Close the run; the hub computes its summary"
)
async def finalize(
    evaluation_id: str, request: Request, hub: HubDep, session: SessionDep, principal: AuthDep
) -> EvaluationEnvelope:
    """Body `{"metrics": {…}}` (optional, the client's own figures, kept beside the hub's)."""
    body = _parse(FinalizeEvaluation, await _read_json(request, _CREATE_BODY_LIMIT, empty_ok=True))
    evaluation = service.finalize_evaluation(
        session, hub.store, evaluation_id, principal, body.metrics, hub.settings
    )
    return EvaluationEnvelope(
        evaluation_id=evaluation.id,
        data=service.evaluation_info(session, evaluation, hub.settings),
    )


@router.get("/evaluations/", summary="List evaluations the caller may read, newest first")
def list_evaluations(
    hub: HubDep,
    session: SessionDep,
    principal: PrincipalDep,
    env: Annotated[str | None, Query(description="owner/name")] = None,
    environment_id: str | None = None,
    environment_name: Annotated[
        str | None, Query(description="owner/name, or a bare name under any owner")
    ] = None,
    model: str | None = None,
    status: EvaluationStatus | None = None,
    page: Annotated[int, Query(ge=1, le=MAX_STORED_INT)] = 1,
    per_page: Annotated[int, Query(ge=1, le=100)] = 20,
    skip: Annotated[
        int | None, Query(ge=0, le=MAX_STORED_INT, description="offset (stock prime client)")
    ] = None,
    limit: Annotated[int | None, Query(ge=1, le=100, description="alias of per_page")] = None,
) -> Page[EvaluationInfo]:
    environment, bare_name = service.listing_environment(
        session, principal, env=env, environment_id=environment_id,
        environment_name=environment_name,
    )  # fmt: skip
    size = limit or per_page
    offset = skip if skip is not None else (page - 1) * size
    result = service.list_evaluations(
        session,
        principal,
        env=environment,
        env_name=bare_name,
        model=model,
        status=status,
        offset=offset,
        limit=size,
    )
    return Page(
        data=[
            service.evaluation_info(session, run, hub.settings)
            for run, _env, _owner in result.items
        ],
        total_count=result.total,
        page=offset // size + 1,
        per_page=size,
    )


@router.get("/evaluations/{evaluation_id}", summary="One evaluation with the hub-computed summary")
def get(
    evaluation_id: str, hub: HubDep, session: SessionDep, principal: PrincipalDep
) -> Envelope[EvaluationInfo]:
    """A run waiting for verification says where it stands (`verification_position`)."""
    evaluation, _env = service.get_evaluation(session, evaluation_id, principal)
    return Envelope(data=service.evaluation_info(session, evaluation, hub.settings))


@router.get("/evaluations/{evaluation_id}/samples", summary="Samples in push order, paged")
def samples(
    evaluation_id: str,
    hub: HubDep,
    session: SessionDep,
    principal: PrincipalDep,
    page: Annotated[int, Query(ge=1, le=MAX_STORED_INT)] = 1,
    per_page: Annotated[int | None, Query(ge=1, le=1000)] = None,
    limit: Annotated[int | None, Query(ge=1, le=1000, description="alias of per_page")] = None,
) -> Page[dict[str, Any]]:
    evaluation, _env = service.get_evaluation(session, evaluation_id, principal)
    size = per_page or limit or 100
    rows = service.read_samples(session, hub.store, evaluation, page, size)
    return Page(data=rows, total_count=evaluation.sample_count, page=page, per_page=size)


@router.get(
    "/environmentshub/{owner}/{name}/leaderboard",
    summary="Best finalized run per model on this environment",
    tags=["evaluations", "environments"],
)
def environment_leaderboard(
    owner: str,
    name: str,
    session: SessionDep,
    principal: PrincipalDep,
    version: str | None = None,
    third_party: Annotated[
        bool, Query(description="include runs pushed by people outside the env's owner")
    ] = True,
    verified: Annotated[
        bool, Query(description="only runs the hub re-scored itself and found matching")
    ] = False,
) -> Leaderboard:
    """Rows state n and a 95% interval; rows whose intervals overlap share a rank (`tied`)."""
    env = service.find_environment(session, owner, name, principal)
    rows = leaderboard(
        session, env, principal, version, include_third_party=third_party, verified_only=verified
    )
    return Leaderboard(environment=f"{owner}/{env.name}", data=rows)


@router.post("/evaluations/{evaluation_id}/hide", summary="Owner: hide a run from the leaderboard")
def hide(evaluation_id: str, session: SessionDep, principal: AuthDep) -> Envelope[EvaluationInfo]:
    evaluation = service.set_hidden(session, evaluation_id, principal, True)
    return Envelope(data=service.evaluation_info(session, evaluation))


@router.post("/evaluations/{evaluation_id}/unhide", summary="Owner: show a hidden run again")
def unhide(evaluation_id: str, session: SessionDep, principal: AuthDep) -> Envelope[EvaluationInfo]:
    evaluation = service.set_hidden(session, evaluation_id, principal, False)
    return Envelope(data=service.evaluation_info(session, evaluation))
