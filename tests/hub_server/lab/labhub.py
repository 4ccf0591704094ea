"""A hub with a Lab, served by uvicorn on loopback from a thread of the test's process.

The Tinker SDK speaks HTTP from an event loop of its own, so the Lab needs a socket; the
engine (the base model, ~10 s to load on CPU) is made once per test module and given to each
hub started on it, so a "restart" (a new app on the same data directory) costs no reload.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pytest
import tinker
import uvicorn
from tinker import types

from hub_server.app import create_app
from hub_server.core.settings import HubSettings
from hub_server.lab.engine import LabEngine
from hub_server.lab.service import LabLimits, LabService
from tests.hub_server.hubproc import HubAccounts
from tests.support import free_port

BASE = "local/smollm2-135m"
TEXTS = ["The capital of France is Paris.", "Two plus two equals four."]
T = TypeVar("T")


@dataclass(kw_only=True)
class LabHub(HubAccounts):
    url: str
    service: LabService
    clients: list[tinker.ServiceClient] = field(default_factory=list)  # closed when it stops

    @property
    def tinker_url(self) -> str:
        """What TINKER_BASE_URL points at."""
        return f"{self.url}/lab"


@contextmanager
def serve_lab(
    data_dir: Path, engine: LabEngine, limits: LabLimits | None = None, port: int | None = None
) -> Iterator[LabHub]:
    """A hub on `data_dir` with `engine` as its Lab, listening (on `port`, else a free one)
    until the block ends."""
    data_dir.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    app = create_app(HubSettings.from_env(data_dir), lab=engine, lab_limits=limits)
    hub = LabHub(data_dir=data_dir, url=f"http://127.0.0.1:{port}", service=app.state.lab)
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the Lab hub did not start")
        time.sleep(0.02)
    try:
        yield hub
    finally:
        try:
            for client in hub.clients:  # while the Lab answers: their heartbeats stop with them
                client.close("success").result(timeout=30)
        finally:
            server.should_exit = True
            thread.join(timeout=30)


def service_client(hub: LabHub, token: str) -> tinker.ServiceClient:
    """An SDK client of `hub` as `token`'s account, closed when the hub stops."""
    client = tinker.ServiceClient(base_url=hub.tinker_url, api_key=f"tml-{token}")
    hub.clients.append(client)
    return client


def tensor(array: np.ndarray) -> types.TensorData:
    return types.TensorData.from_numpy(array)


def batch(engine: Any) -> list[types.Datum]:
    """A cross-entropy batch of `TEXTS`, tokenised by `engine`'s tokenizer."""
    data = []
    for text in TEXTS:
        ids = engine.tokenizer.encode(text)
        data.append(
            types.Datum(
                model_input=types.ModelInput.from_ints(ids[:-1]),
                loss_fn_inputs={
                    "target_tokens": tensor(np.array(ids[1:], dtype=np.int64)),
                    "weights": tensor(np.ones(len(ids) - 1, dtype=np.float32)),
                },
            )
        )
    return data


def held(hub: LabHub, send: Callable[[], list[T]], count: int) -> list[T]:
    """What `send` returns, its `count` requests queued on the Lab while its worker is held,
    so they are all waiting when it is free again."""
    gate = threading.Event()
    queue = hub.service.queue
    queue.submit("someone", "hold", lambda: {"held": gate.wait(60)})
    sent = send()
    deadline = time.monotonic() + 60
    while sum(len(q) for q in queue._queues.values()) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    gate.set()
    return sent


def two_tenants_samplers(lab: LabHub, data: list[types.Datum]) -> list[Any]:
    """The samplers of two accounts' own adapters (the admin's and a new account's, rank 4,
    one step on `data` each) and the new account's base-model sampler."""
    grace = lab.add_user("grace", scopes=["train"])
    samplers: list[Any] = []
    for seed, token in enumerate((lab.admin_token, grace)):
        trainer = (
            service_client(lab, token)
            .create_lora_training_client(base_model=BASE, rank=4, seed=seed)
            .result()
        )
        trainer.forward_backward(data, "cross_entropy").result()
        trainer.optim_step(types.AdamParams(learning_rate=5e-3)).result()
        samplers.append(trainer.save_weights_and_get_sampling_client().result())
    samplers.append(service_client(lab, grace).create_sampling_client(base_model=BASE).result())
    return samplers


def batch_sizes(engine: Any, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of calls in each `sample_batch` the engine runs from now on (it still
    decodes them): how the Lab batched the requests that reached it."""
    sizes: list[int] = []
    decode = engine.sample_batch

    def recording(calls: Any, more: Any, done: Any) -> None:
        sizes.append(len(calls))
        decode(calls, more, done)

    monkeypatch.setattr(engine, "sample_batch", recording)
    return sizes
