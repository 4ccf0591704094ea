"""The Lab: tenants' sessions, models, samplers and checkpoints over one `LabEngine`.

Every model is a LoRA adapter on the engine's one base model, owned by the account (the hub
user) whose `train`-scoped token created it; every lookup is by (account, id), so another
account's model, sampler, request or `tinker://` path answers 404 exactly as an unknown one.
Engine work goes through the `FairQueue` (one worker, round-robin by account) and answers
with a future id; the rest answers at once. Sample requests run in batches there: those
waiting together (any accounts, any samplers) decode as one, and more join between two
tokens (`LabEngine.sample_batch`). Checkpoints are blobs of the hub's store
(`checkpoints.CheckpointStore`), so they outlive the process.
"""

from __future__ import annotations

import logging
import math
import re
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Engine

from hub_server.core.blobstore import BlobStorage
from hub_server.core.errors import BadRequest, NotFound
from hub_server.lab import wire
from hub_server.lab.checkpoints import CheckpointStore, TinkerPath
from hub_server.lab.engine import LabEngine, SampleCall, SampledTokens
from hub_server.lab.models import LabCheckpoint
from hub_server.lab.scheduler import Batching, FairQueue, Future, Queued

log = logging.getLogger(__name__)

SESSION_ID = re.compile(r"^[0-9a-f]{20}$")


def _adapter_name() -> str:
    """A fresh adapter name on the engine (never a tenant's id: those are not module-safe)."""
    return f"m{uuid.uuid4().hex}"


@dataclass
class LabLimits:
    """Per-account caps: live models, live samplers, queued requests, checkpoint bytes; and
    the rows one sampling batch decodes at once (all accounts together)."""

    max_models: int = 4
    max_samplers: int = 8
    max_queued: int = 64
    quota_bytes: int = 2 * 1024**3
    batch_rows: int = 64


@dataclass
class _Model:
    model_id: str
    account: str
    adapter: str
    rank: int
    base_model: str
    loaded: bool = True  # False: known from the database, its adapter not yet restored


@dataclass
class _Sampler:
    sampler_id: str
    account: str
    base_model: str
    adapter: str | None  # None: the base model
    model_path: str | None
    loaded: bool


@dataclass(frozen=True)
class _SampleJob:
    """A queued sample request: whose sampler, what to decode, whether to score the prompt
    (and its last how many tokens)."""

    sampler: _Sampler
    call: SampleCall
    scored: bool
    last_n: int | None


def _sample_job(item: Queued) -> _SampleJob:
    if not isinstance(item.job, _SampleJob):
        raise TypeError(f"a sample batch was given {type(item.job).__name__}")
    return item.job


class LabService:
    """The Tinker API's semantics for the hub's routes (`hub_server.lab.api`)."""

    def __init__(self, engine: LabEngine, store: CheckpointStore, limits: LabLimits) -> None:
        self.engine = engine
        self.store = store
        self.limits = limits
        batching = {"sample": Batching(self._run_samples, limits.batch_rows)}
        self.queue = FairQueue(max_queued=limits.max_queued, batching=batching)
        self._lock = threading.Lock()
        self._sessions: dict[str, str] = {}
        self._models: dict[str, _Model] = {}
        self._samplers: dict[str, _Sampler] = {}

    def close(self) -> None:
        self.queue.stop()

    # ------------------------------------------------------------------ sessions

    def capabilities(self) -> dict[str, Any]:
        model = {
            "model_name": self.engine.base_model,
            "max_context_length": self.engine.max_context,
            "trainable": True,
            "sampleable": True,
        }
        return {"supported_models": [model]}

    def create_session(self, account: str) -> str:
        session_id = uuid.uuid4().hex[:20]
        with self._lock:
            self._sessions[session_id] = account
        return session_id

    def session(self, account: str, session_id: str) -> str:
        """The account's session: one this process has not seen (the hub restarted since it
        began; its id is 80 random bits) is adopted; another account's is 404."""
        if not SESSION_ID.match(session_id):
            raise NotFound(f"No session {session_id!r} on this Lab.")
        with self._lock:
            owner = self._sessions.setdefault(session_id, account)
        if owner != account:
            raise NotFound(f"No session {session_id!r} on this Lab for this account.")
        return session_id

    @staticmethod
    def model_id(session_id: str, model_seq_id: int) -> str:
        """The id the SDK itself derives for a session's `model_seq_id`-th training client."""
        return f"{session_id}:train:{model_seq_id}"

    # ------------------------------------------------------------------ models

    def model(self, account: str, model_id: str) -> _Model:
        """The account's model; one the database knows but this process does not (the hub
        restarted) comes back, its adapter restored by its next request (`_restore`)."""
        found = self._models.get(model_id)
        if found is None:
            row = self.store.model_row(account, model_id)
            if row is not None and row.base_model == self.engine.base_model:
                found = _Model(row.id, account, _adapter_name(), row.rank, row.base_model, False)
                with self._lock:
                    found = self._models.setdefault(model_id, found)
        if found is None or found.account != account:
            raise NotFound(f"No model {model_id!r} on this Lab for this account.")
        return found

    def _restore(self, model: _Model) -> None:
        """Load a model known only from the database from its newest state (worker only)."""
        if model.loaded:
            return
        key = self.store.latest_state(model.account, model.model_id)
        if key is None:
            raise ValueError(
                f"Model {model.model_id} was not saved (save_state) before the Lab restarted, "
                "so its training state is gone; create a model or load a checkpoint."
            )
        self.engine.load(model.adapter, self.store.read(key), optimizer=True)
        model.loaded = True

    def _check_base(self, base_model: str | None) -> str:
        if base_model not in (None, self.engine.base_model):
            raise BadRequest(
                f"This Lab serves {self.engine.base_model!r}, not {base_model!r}; "
                "see get_server_capabilities."
            )
        return self.engine.base_model

    def create_model(self, account: str, request: Any) -> Future:
        base = self._check_base(request.base_model)
        lora = request.lora_config
        if lora is None:
            raise BadRequest("Full fine-tuning is not served: pass a lora_config (a rank).")
        mine = sum(1 for m in self._models.values() if m.account == account)
        if mine >= self.limits.max_models:
            raise BadRequest(
                f"This account has {mine} models on the Lab, the most it may; unload one "
                "(unload_model) before creating another."
            )
        model_id = self.model_id(self.session(account, request.session_id), request.model_seq_id)
        if model_id in self._models or self.store.model_row(account, model_id) is not None:
            raise BadRequest(f"Model {model_id} exists already.")
        model = _Model(model_id, account, _adapter_name(), lora.rank, base)

        def work() -> dict[str, Any]:
            self.engine.create_adapter(
                model.adapter, lora.rank, lora.seed, lora.train_mlp, lora.train_attn
            )
            with self._lock:
                self._models[model_id] = model
            self.store.register_model(account, model_id, base, lora.rank)
            return {"model_id": model_id, "type": "create_model"}

        return self.queue.submit(account, "create_model", work)

    def info(self, account: str, model_id: str) -> dict[str, Any]:
        model = self.model(account, model_id)
        return {
            "type": "get_info",
            "model_id": model.model_id,
            "model_data": {
                "arch": "llama",
                "model_name": model.base_model,
                "tokenizer_id": model.base_model,
            },
            "is_lora": True,
            "lora_rank": model.rank,
            "model_name": model.base_model,
        }

    def unload(self, account: str, model_id: str) -> Future:
        model = self.model(account, model_id)

        def work() -> dict[str, Any]:
            if model.loaded:
                self.engine.delete_adapter(model.adapter)
            with self._lock:
                self._models.pop(model_id, None)
            return {"model_id": model_id, "type": "unload_model"}

        return self.queue.submit(account, "unload_model", work)

    # ------------------------------------------------------------------ training

    def forward_backward(self, account: str, call: wire.ForwardBackwardCall) -> Future:
        model = self.model(account, call.model_id)
        if not call.tokens:
            raise BadRequest("forward_backward needs at least one datum.")

        def work() -> bytes:
            self._restore(model)
            outputs, metrics = self.engine.forward_backward(
                model.adapter,
                call.tokens,
                call.inputs,
                call.loss_fn,
                call.config,
                call.forward_only,
            )
            return wire.forward_backward_output(outputs, metrics)

        kind = "forward" if call.forward_only else "forward_backward"
        return self.queue.submit(account, kind, work)

    def optim_step(self, account: str, request: Any) -> Future:
        model = self.model(account, request.model_id)
        params = request.optim_params
        if not hasattr(params, "beta1") or getattr(params, "type", "adamw") != "adamw":
            raise BadRequest("Only Adam steps are served (AdamParams).")
        adam = {
            "learning_rate": params.learning_rate,
            "beta1": params.beta1,
            "beta2": params.beta2,
            "eps": params.eps,
            "weight_decay": params.weight_decay,
            "grad_clip_norm": params.grad_clip_norm,
        }

        def work() -> dict[str, Any]:
            self._restore(model)
            return {"metrics": self.engine.optim_step(model.adapter, adam)}

        return self.queue.submit(account, "optim_step", work)

    # ------------------------------------------------------------------ checkpoints

    def save_state(self, account: str, request: Any) -> Future:
        model = self.model(account, request.model_id)
        path = TinkerPath.new(model.model_id, "weights", request.path)

        def work() -> dict[str, Any]:
            self._restore(model)
            archive = self.engine.save(model.adapter, optimizer=True)
            self.store.put(account, path, archive, overwrite=bool(request.overwrite))
            return {"path": str(path), "type": "save_weights"}

        return self.queue.submit(account, "save_weights", work)

    def save_for_sampler(self, account: str, request: Any) -> Future:
        model = self.model(account, request.model_id)
        if request.path is not None:
            path = TinkerPath.new(model.model_id, "sampler_weights", request.path)

            def persist() -> dict[str, Any]:
                self._restore(model)
                self.store.put(account, path, self.engine.save(model.adapter, optimizer=False))
                return {"path": str(path), "type": "save_weights_for_sampler"}

            return self.queue.submit(account, "save_weights_for_sampler", persist)
        sampler = self._new_sampler(account, model.base_model, f"s{uuid.uuid4().hex}", None)

        def snapshot() -> dict[str, Any]:
            self._restore(model)
            self.engine.copy_adapter(model.adapter, sampler.adapter or "")
            sampler.loaded = True
            self._evict_samplers(account)
            return {"sampling_session_id": sampler.sampler_id, "type": "save_weights_for_sampler"}

        return self.queue.submit(account, "save_weights_for_sampler", snapshot)

    def load_state(self, account: str, request: Any) -> Future:
        path = TinkerPath.parse(request.path)
        archive_key = self.store.find(account, path)  # 404 before anything is queued
        optimizer = bool(request.optimizer)
        if request.model_id is None:
            return self.create_model_from(account, request)
        model = self.model(account, request.model_id)

        def work() -> dict[str, Any]:
            archive = self.store.read(archive_key)
            self.engine.load(model.adapter, archive, optimizer)
            model.loaded, model.rank = True, CheckpointStore.rank_of(archive)
            return {"path": str(path), "model_id": model.model_id, "type": "load_weights"}

        return self.queue.submit(account, "load_weights", work)

    def create_model_from(self, account: str, request: Any) -> Future:
        """load_weights without a model: a new model from a checkpoint (its shape)."""
        base = self._check_base(request.base_model)
        path = TinkerPath.parse(request.path)
        archive_key = self.store.find(account, path)
        if request.session_id is None or request.model_seq_id is None:
            raise BadRequest("load_weights needs a model_id, or a session_id and model_seq_id.")
        model_id = self.model_id(self.session(account, request.session_id), request.model_seq_id)
        optimizer = bool(request.optimizer)

        def work() -> dict[str, Any]:
            archive = self.store.read(archive_key)
            adapter = _adapter_name()
            self.engine.load(adapter, archive, optimizer)
            rank = CheckpointStore.rank_of(archive)
            with self._lock:
                self._models[model_id] = _Model(model_id, account, adapter, rank, base)
            self.store.register_model(account, model_id, base, rank)
            return {"path": str(path), "model_id": model_id, "type": "load_weights"}

        return self.queue.submit(account, "load_weights", work)

    def delete_checkpoint(self, account: str, model_id: str, checkpoint_id: str) -> Future:
        """Queue the deletion of `tinker://MODEL/CHECKPOINT_ID` (404 at once when unknown)."""
        path = TinkerPath.parse(f"tinker://{model_id}/{checkpoint_id}")
        self.store.find(account, path)

        def work() -> dict[str, Any]:
            self.store.delete(account, path)
            return {"path": str(path)}

        return self.queue.submit(account, "delete_checkpoint", work)

    @staticmethod
    def describe(row: LabCheckpoint) -> dict[str, Any]:
        """A checkpoint row as the SDK's `Checkpoint`."""
        path = TinkerPath(row.model_id, row.kind, row.name)
        return {
            "checkpoint_id": f"{row.kind}/{row.name}",
            "checkpoint_type": "training" if row.kind == "weights" else "sampler",
            "time": row.created_at.isoformat(),
            "tinker_path": str(path),
            "size_bytes": row.size,
        }

    def archive(self, account: str, tinker_path: str) -> bytes:
        """A checkpoint as a tar of a PEFT adapter directory (its optimizer state left out)."""
        return self.store.peft_archive(self.store.find(account, TinkerPath.parse(tinker_path)))

    # ------------------------------------------------------------------ sampling

    def _new_sampler(
        self, account: str, base: str, adapter: str | None, model_path: str | None
    ) -> _Sampler:
        sampler = _Sampler(f"sampler-{uuid.uuid4().hex}", account, base, adapter, model_path, False)
        with self._lock:
            self._samplers[sampler.sampler_id] = sampler
        return sampler

    def _evict_samplers(self, account: str) -> None:
        """Past `max_samplers` live snapshots, the oldest are dropped (worker thread only)."""
        live = [
            s for s in self._samplers.values() if s.account == account and s.loaded and s.adapter
        ]
        for sampler in live[: max(0, len(live) - self.limits.max_samplers)]:
            self.engine.delete_adapter(sampler.adapter or "")
            sampler.loaded = False

    def create_sampler(self, account: str, request: Any) -> str:
        if request.model_path is None:
            base = self._check_base(request.base_model)
            sampler = self._new_sampler(account, base, None, None)
            sampler.loaded = True
            return sampler.sampler_id
        self.store.find(account, TinkerPath.parse(request.model_path))  # 404 now, not later
        return self._new_sampler(
            account, self.engine.base_model, f"s{uuid.uuid4().hex}", request.model_path
        ).sampler_id

    def sampler(self, account: str, sampler_id: str) -> _Sampler:
        found = self._samplers.get(sampler_id)
        if found is None or found.account != account:
            raise NotFound(f"No sampling session {sampler_id!r} on this Lab for this account.")
        return found

    def sample(self, account: str, request: Any) -> tuple[Future, list[str]]:
        # A sampling client's session, else a one-off sampler of the request's own model_path
        # or base_model (the SDK's sessionless form).
        sampler_id = request.sampling_session_id or self.create_sampler(account, request)
        sampler = self.sampler(account, sampler_id)
        if not 1 <= request.num_samples <= 64:
            raise BadRequest("num_samples must be 1 to 64.")
        prompt = wire.prompt_tokens(request.prompt)
        params = request.sampling_params
        stop_tokens, stop_strings = wire.stops(params.stop)
        values: dict[str, float | int | None] = {
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
            "top_k": params.top_k,
            "top_p": params.top_p,
            "seed": params.seed,
        }

        call = SampleCall(
            sampler.adapter, prompt, request.num_samples, values, stop_tokens, stop_strings
        )
        job = _SampleJob(
            sampler, call, bool(request.prompt_logprobs), request.prompt_logprobs_last_n
        )
        future = self.queue.submit_job(account, "sample", job, request.num_samples)
        ids = [f"{future.request_id}-{i}" for i in range(request.num_samples)]
        return future, ids

    def _run_samples(self, items: list[Queued], more: Callable[[int], list[Queued]]) -> None:
        """A batch of sample requests (the queue's), decoded together by the engine; each
        answered as its rows end. Samplers past an account's cap are dropped after it."""
        answering: list[tuple[Future, list[float] | None]] = []  # per call given the engine
        accounts: set[str] = set()

        def ready(new: list[Queued]) -> list[SampleCall]:
            calls = []
            for item in new:
                job = _sample_job(item)
                accounts.add(job.sampler.account)
                try:
                    scored = self._ready(job)
                except ValueError as error:
                    item.future.fail(error)
                    continue
                except Exception as error:
                    log.exception("Lab request %s failed", item.future.request_id)
                    item.future.fail(error)
                    continue
                answering.append((item.future, scored))
                calls.append(job.call)
            return calls

        def done(index: int, outcome: list[SampledTokens] | ValueError) -> None:
            future, scored = answering[index]
            if isinstance(outcome, ValueError):
                future.fail(outcome)
            else:
                future.fulfil(wire.sample_response(outcome, scored))

        try:
            self.engine.sample_batch(ready(items), lambda rows: ready(more(rows)), done)
        finally:
            for account in accounts:
                self._evict_samplers(account)

    def _ready(self, job: _SampleJob) -> list[float] | None:
        """Load the job's sampler weights if they are not in memory; its prompt's logprobs
        if asked (NaN where none is computed)."""
        sampler = job.sampler
        if not sampler.loaded:
            if sampler.model_path is None:
                raise ValueError(
                    "This sampling client's weights were dropped (too many samplers on "
                    "the account); save weights for a sampler again."
                )
            key = self.store.find(sampler.account, TinkerPath.parse(sampler.model_path))
            self.engine.load(sampler.adapter or "", self.store.read(key), optimizer=False)
            sampler.loaded = True
        if not job.scored:
            return None
        prompt = job.call.prompt
        logprobs = [math.nan, *self.engine.prompt_logprobs(sampler.adapter, prompt)]
        if job.last_n is not None:
            logprobs = [math.nan] * max(0, len(prompt) - job.last_n) + logprobs[-job.last_n :]
        return logprobs


def open_lab(
    engine: LabEngine, database: Engine, store: BlobStorage, limits: LabLimits | None
) -> LabService:
    """The Lab of a hub: `engine` over the hub's database and blob store."""
    limits = limits or LabLimits()
    return LabService(engine, CheckpointStore(database, store, limits.quota_bytes), limits)
