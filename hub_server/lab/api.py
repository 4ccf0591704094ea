"""The Lab's routes: the Tinker API under `/lab/api/v1/…` (`TINKER_BASE_URL=HUB/lab`).

Thin: each route authenticates the caller (a hub token with the `train` scope, sent by the
SDK as `X-API-Key: tml-<token>`), parses the SDK's body and hands it to the `LabService`
that `prime hub serve --lab` hung on `app.state.lab`; without one every route is a 404 that
says how to start a Lab. Work that runs on the model answers with a future's id, fetched by
`retrieve_future` (a long poll; `try_again` while it runs).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response

from hub_server.core.errors import BadRequest, Forbidden, NotFound
from hub_server.http.deps import AuthDep
from registry_index import scopes

if TYPE_CHECKING:
    from hub_server.lab.scheduler import Future
    from hub_server.lab.service import LabService

router = APIRouter(prefix="/lab/api/v1", include_in_schema=False)
PROTOBUF = "application/x-protobuf"

# What the SDK is told at start (ClientConfigResponse): API keys (no JWT exchange), httpx
# (not pyqwest), forward_backward chunks one after another (this Lab runs them in order), no
# zstd bodies, one retrieve_future per request.
CLIENT_CONFIG: dict[str, Any] = {
    "pjwt_auth_enabled": False,
    "use_pyqwest_transport": False,
    "parallel_fwdbwd_chunks": False,
    "proto_compress_fwdbwd": False,
    "sample_use_retrieve_futures": False,
    "custom_loss_server_side": False,
    "sample_join_sampling_session": False,
}


def get_lab(request: Request) -> LabService:
    lab: LabService | None = getattr(request.app.state, "lab", None)
    if lab is None:
        raise NotFound(
            "This hub serves no Lab; its operator starts one with `prime hub serve --lab`."
        )
    return lab


def get_account(principal: AuthDep) -> str:
    """The caller's account (the hub user); a token without the `train` scope is refused."""
    if not scopes.trains(principal.scopes):
        raise Forbidden(
            "This token may not train: create one with `prime hub token create USER --name N "
            "--scope train` and set TINKER_API_KEY=tml-<token>."
        )
    return principal.user.id


LabDep = Annotated["LabService", Depends(get_lab)]
AccountDep = Annotated[str, Depends(get_account)]


async def _json(request: Request) -> Any:
    try:
        return json.loads(await request.body() or b"{}")
    except ValueError:
        raise BadRequest("The body is not JSON.") from None


async def _parse(request: Request, model: str) -> Any:
    from hub_server.lab import wire

    try:
        return wire.parse(model, await _json(request))
    except ValueError as error:
        raise BadRequest(f"Invalid request: {error}") from None


def _promise(future: Future, model_id: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"request_id": future.request_id, "model_id": model_id, **extra}


# ---------------------------------------------------------------------- service


@router.get("/healthz")
def healthz(_lab: LabDep) -> dict[str, str]:
    return {"status": "ok"}


@router.get("/get_server_capabilities")
def capabilities(lab: LabDep, _account: AccountDep) -> dict[str, Any]:
    return lab.capabilities()


@router.post("/client/config")
def client_config(_lab: LabDep, _account: AccountDep) -> dict[str, Any]:
    return CLIENT_CONFIG


@router.post("/client/dynamic_config")
def client_dynamic_config(_lab: LabDep, _account: AccountDep) -> dict[str, Any]:
    return {"refresh_interval_sec": 300, "sample_cancel_enabled": False}


@router.post("/telemetry")
def telemetry(_lab: LabDep, _account: AccountDep) -> dict[str, str]:
    return {"status": "accepted"}  # the SDK's own telemetry: accepted, not kept


@router.post("/create_session")
async def create_session(request: Request, lab: LabDep, account: AccountDep) -> dict[str, Any]:
    await _parse(request, "CreateSessionRequest")
    return {"type": "create_session", "session_id": lab.create_session(account)}


@router.post("/session_heartbeat")
async def heartbeat(request: Request, lab: LabDep, account: AccountDep) -> dict[str, str]:
    body = await _parse(request, "SessionHeartbeatRequest")
    lab.session(account, body.session_id)
    return {"type": "session_heartbeat"}


@router.post("/sessions/{session_id}/finish")
def finish_session(session_id: str, lab: LabDep, account: AccountDep) -> dict[str, str]:
    """`ServiceClient.close(status)`: acknowledged; the session's models live on (unload_model
    or the account's cap ends them)."""
    lab.session(account, session_id)
    return {"type": "finish_session"}


# ---------------------------------------------------------------------- models and training


@router.post("/create_model")
async def create_model(request: Request, lab: LabDep, account: AccountDep) -> dict[str, Any]:
    return _promise(lab.create_model(account, await _parse(request, "CreateModelRequest")))


@router.post("/get_info")
async def get_info(request: Request, lab: LabDep, account: AccountDep) -> dict[str, Any]:
    body = await _parse(request, "GetInfoRequest")
    return lab.info(account, body.model_id)


@router.post("/unload_model")
async def unload_model(request: Request, lab: LabDep, account: AccountDep) -> dict[str, Any]:
    body = await _parse(request, "UnloadModelRequest")
    return _promise(lab.unload(account, body.model_id), body.model_id)


@router.post("/forward_backward")
async def forward_backward(request: Request, lab: LabDep, account: AccountDep) -> dict[str, Any]:
    from hub_server.lab import wire

    if PROTOBUF not in request.headers.get("content-type", ""):
        raise BadRequest(f"forward_backward takes a protobuf body ({PROTOBUF}), as the SDK sends.")
    try:
        call = wire.read_forward_backward(
            await request.body(), request.headers.get("content-encoding")
        )
    except ValueError as error:
        raise BadRequest(f"Invalid forward_backward: {error}") from None
    return _promise(lab.forward_backward(account, call), call.model_id)


@router.post("/optim_step")
async def optim_step(request: Request, lab: LabDep, account: AccountDep) -> dict[str, Any]:
    body = await _parse(request, "OptimStepRequest")
    return _promise(lab.optim_step(account, body), body.model_id)


@router.post("/save_weights")
async def save_weights(request: Request, lab: LabDep, account: AccountDep) -> dict[str, Any]:
    body = await _parse(request, "SaveWeightsRequest")
    return _promise(lab.save_state(account, body), body.model_id)


@router.post("/save_weights_for_sampler")
async def save_for_sampler(request: Request, lab: LabDep, account: AccountDep) -> dict[str, Any]:
    body = await _parse(request, "SaveWeightsForSamplerRequest")
    return _promise(lab.save_for_sampler(account, body), body.model_id)


@router.post("/load_weights")
async def load_weights(request: Request, lab: LabDep, account: AccountDep) -> dict[str, Any]:
    body = await _parse(request, "LoadWeightsRequest")
    return _promise(lab.load_state(account, body), body.model_id)


# ---------------------------------------------------------------------- sampling


@router.post("/create_sampling_session")
async def create_sampler(request: Request, lab: LabDep, account: AccountDep) -> dict[str, Any]:
    body = await _parse(request, "CreateSamplingSessionRequest")
    sampler_id = lab.create_sampler(account, body)
    return {"type": "create_sampling_session", "sampling_session_id": sampler_id}


@router.get("/samplers/{sampler_id}")
def sampler(sampler_id: str, lab: LabDep, account: AccountDep) -> dict[str, Any]:
    found = lab.sampler(account, sampler_id)
    return {
        "sampler_id": found.sampler_id,
        "base_model": found.base_model,
        "model_path": found.model_path,
    }


@router.post("/asample")
async def asample(request: Request, lab: LabDep, account: AccountDep) -> dict[str, Any]:
    future, sequence_ids = lab.sample(account, await _parse(request, "SampleRequest"))
    return _promise(future, sample_sequence_ids=sequence_ids)


# ---------------------------------------------------------------------- futures


@router.post("/retrieve_future")
async def retrieve_future(request: Request, lab: LabDep, account: AccountDep) -> Response:
    body = await _parse(request, "FutureRetrieveRequest")
    future = lab.queue.find(body.request_id, account)
    if not await lab.queue.wait(future):
        state = (
            "paused_rate_limit" if lab.queue.queued(account) >= lab.queue.max_queued else "active"
        )
        return JSONResponse(
            {"type": "try_again", "request_id": future.request_id, "queue_state": state}
        )
    if future.error is not None:
        category = "user" if future.user_error else "server"
        return JSONResponse({"error": future.error, "category": category})
    if isinstance(future.result, bytes):
        return Response(future.result, media_type=PROTOBUF)
    return JSONResponse(future.result)


# ---------------------------------------------------------------------- checkpoints


@router.get("/training_runs/{model_id}/checkpoints")
def checkpoints(model_id: str, lab: LabDep, account: AccountDep) -> dict[str, Any]:
    lab.model(account, model_id)
    return {"checkpoints": [lab.describe(row) for row in lab.store.listing(account, model_id)]}


@router.delete("/training_runs/{model_id}/checkpoints/{checkpoint_id:path}", status_code=204)
async def delete_checkpoint(
    model_id: str, checkpoint_id: str, lab: LabDep, account: AccountDep
) -> Response:
    """Delete a checkpoint (its quota freed once the worker has removed it)."""
    future = lab.delete_checkpoint(account, model_id, checkpoint_id)
    await lab.queue.wait(future)
    if future.error is not None:
        raise BadRequest(future.error)
    return Response(status_code=204)


@router.get("/checkpoints")
def all_checkpoints(lab: LabDep, account: AccountDep) -> dict[str, Any]:
    return {"checkpoints": [lab.describe(row) for row in lab.store.listing(account)]}


@router.get("/checkpoint_archive")
def checkpoint_archive(path: str, lab: LabDep, account: AccountDep) -> Response:
    """A checkpoint as a tar of a PEFT adapter directory (`prime eval run --adapter DIR`)."""
    return Response(lab.archive(account, path), media_type="application/x-tar")
