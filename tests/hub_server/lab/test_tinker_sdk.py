"""The official `tinker` SDK (0.38, unchanged) against the hub's Lab, on CPU.

One hub and one engine (local/smollm2-135m, fp32) for the module. The SDK creates a LoRA
training client, lowers a fixed batch's cross-entropy in five steps, samples from its saved
weights (logprobs checked against the torch backend, `local_model` with the exported PEFT
adapter), and runs `importance_sampling` and `ppo` steps; two accounts' samples decode in one
batch as each alone; a `read` token is refused.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import tinker
import torch
from click.testing import CliRunner
from tinker import types

from hub_server.lab.service import LabLimits
from local_model.model_dirs import with_adapter
from local_model.models import load_local_model
from prime_cli.main import cli
from tests.hub_server.lab.labhub import (
    BASE,
    LabHub,
    batch,
    batch_sizes,
    held,
    serve_lab,
    service_client,
    tensor,
    two_tenants_samplers,
)
from trainer_bridge.lab.engine import TorchLabEngine

pytestmark = pytest.mark.xdist_group("lab")


@pytest.fixture(scope="module")
def engine() -> TorchLabEngine:
    torch.manual_seed(0)
    return TorchLabEngine(BASE)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, engine: TorchLabEngine) -> Iterator[LabHub]:
    with serve_lab(tmp_path_factory.mktemp("lab-hub"), engine) as hub:
        hub.admin_token = hub.add_user("alice")
        yield hub


def export(hub: LabHub, token: str, path: str, into: Path) -> Path:
    """`prime lab export PATH DIR`: the checkpoint as a PEFT adapter directory."""
    result = CliRunner().invoke(
        cli, ["lab", "export", path, str(into), "--lab", hub.tinker_url, "--key", token]
    )
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in into.iterdir()) == [
        "adapter_config.json",
        "adapter_model.safetensors",
    ]
    return into


def torch_logprobs(adapter: Path, prompt: list[int], completion: list[int]) -> np.ndarray:
    """The torch backend's logprobs of `completion` after `prompt` (local_model + peft)."""
    base, _ = load_local_model(BASE.removeprefix("local/"))
    model: Any = with_adapter(base, adapter)
    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0].float()
    logp = torch.log_softmax(logits, dim=-1)
    rows = torch.arange(len(prompt) - 1, len(prompt) + len(completion) - 1)
    return logp[rows, torch.tensor(completion)].numpy()


def test_sdk_trains_samples_and_matches_the_torch_backend(
    lab: LabHub, engine: TorchLabEngine, tmp_path: Path
) -> None:
    client = service_client(lab, lab.admin_token)
    rest = tinker.RestClient(base_url=lab.tinker_url, api_key=f"tml-{lab.admin_token}")
    capabilities = rest.get_server_capabilities().result()
    assert [m.model_name for m in capabilities.supported_models] == [BASE]
    trainer = client.create_lora_training_client(base_model=BASE, rank=8, seed=0).result()
    data = batch(engine)
    losses = []
    for _ in range(5):
        step = trainer.forward_backward(data, "cross_entropy")
        update = trainer.optim_step(types.AdamParams(learning_rate=2e-3))
        result = step.result()
        update.result()
        losses.append(result.metrics["loss:sum"])
        assert [len(out["logprobs"].tolist()) for out in result.loss_fn_outputs] == [
            len(d.model_input.to_ints()) for d in data
        ]
    assert losses[-1] < losses[0] * 0.8, losses
    assert all(b < a for a, b in itertools.pairwise(losses)), losses

    sampler = trainer.save_weights_and_get_sampling_client().result()
    prompt = engine.tokenizer.encode("The capital of France")
    params = types.SamplingParams(max_tokens=6, temperature=1.0, seed=7)
    answer = sampler.sample(types.ModelInput.from_ints(prompt), 2, params).result()
    assert len(answer.sequences) == 2
    saved = trainer.save_weights_for_sampler(name="after-5").result().path
    adapter = export(lab, lab.admin_token, saved, tmp_path / "adapter")
    for sequence in answer.sequences:
        assert sequence.logprobs is not None and len(sequence.tokens) == len(sequence.logprobs)
        expected = torch_logprobs(adapter, prompt, sequence.tokens)
        assert np.abs(np.array(sequence.logprobs) - expected).max() < 1e-3

    # RL losses on the sampled tokens: the sampler's logprobs are the behaviour policy's.
    rl_data = []
    for sequence, advantage in zip(answer.sequences, (1.0, -1.0), strict=True):
        tokens = prompt + sequence.tokens
        n = len(tokens) - 1
        sampled = np.zeros(n, dtype=np.float32)
        sampled[len(prompt) - 1 :] = sequence.logprobs
        advantages = np.zeros(n, dtype=np.float32)
        advantages[len(prompt) - 1 :] = advantage
        rl_data.append(
            types.Datum(
                model_input=types.ModelInput.from_ints(tokens[:-1]),
                loss_fn_inputs={
                    "target_tokens": tensor(np.array(tokens[1:], dtype=np.int64)),
                    "logprobs": tensor(sampled),
                    "advantages": tensor(advantages),
                },
            )
        )
    for loss in ("importance_sampling", "ppo"):
        out = trainer.forward_backward(rl_data, loss).result()
        trainer.optim_step(types.AdamParams(learning_rate=1e-4)).result()
        assert math.isfinite(out.metrics["loss:sum"])
        assert len(out.loss_fn_outputs) == 2


def test_two_accounts_samples_decode_in_one_batch_as_each_alone(
    lab: LabHub, engine: TorchLabEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sample requests of two accounts (each its own trained adapter) and of a base-model
    sampler, waiting together, decode as one batch, and each gets (seeded, at temperature 1)
    the tokens and logprobs it gets alone."""
    samplers = two_tenants_samplers(lab, batch(engine))
    prompt = types.ModelInput.from_ints(engine.tokenizer.encode("The capital of France"))
    params = types.SamplingParams(max_tokens=8, temperature=1.0, seed=11)
    alone = [s.sample(prompt, 2, params).result().sequences for s in samplers]

    batches = batch_sizes(engine, monkeypatch)
    pending = held(lab, lambda: [s.sample(prompt, 2, params) for s in samplers], 3)
    together = [p.result().sequences for p in pending]
    assert batches == [3]
    for batched, own in zip(together, alone, strict=True):
        assert [s.tokens for s in batched] == [s.tokens for s in own]
        for got, want in zip(batched, own, strict=True):
            assert np.abs(np.array(got.logprobs) - np.array(want.logprobs)).max() < 1e-4
    first_logprobs = {tuple(seqs[0].logprobs or []) for seqs in together}
    assert len(first_logprobs) == 3  # each sampler decoded by its own weights


def test_a_read_token_is_refused(lab: LabHub) -> None:
    read_token = lab.token_for("alice", ["read"])
    reply = httpx.post(
        f"{lab.tinker_url}/api/v1/create_session",
        json={"tags": [], "user_metadata": {}, "sdk_version": "0.38.0"},
        headers={"X-API-Key": f"tml-{read_token}"},
    )
    assert reply.status_code == 403
    assert "--scope train" in reply.json()["detail"]
    with pytest.raises(tinker.PermissionDeniedError, match="--scope train"):
        service_client(lab, read_token).create_lora_training_client(base_model=BASE, rank=8)


def test_two_accounts_train_at_once_and_see_only_their_own(
    lab: LabHub, engine: TorchLabEngine
) -> None:
    bob_token = lab.add_user("bob", scopes=["train"])
    data = batch(engine)
    trainers = {}
    for name, token in (("alice", lab.admin_token), ("bob", bob_token)):
        trainers[name] = (
            service_client(lab, token).create_lora_training_client(base_model=BASE, rank=4)
        ).result()
    # Both submit before either waits: the Lab interleaves them.
    steps = {n: t.forward_backward(data, "cross_entropy") for n, t in trainers.items()}
    updates = {n: t.optim_step(types.AdamParams(learning_rate=1e-3)) for n, t in trainers.items()}
    for name in trainers:
        assert math.isfinite(steps[name].result().metrics["loss:sum"])
        updates[name].result()
    alice = trainers["alice"]
    state = alice.save_state("shared-name").result().path
    sampler_path = alice.save_weights_for_sampler("shared-name").result().path
    sampler = alice.save_weights_and_get_sampling_client().result()

    as_bob = httpx.Client(
        base_url=f"{lab.tinker_url}/api/v1", headers={"X-API-Key": f"tml-{bob_token}"}
    )
    alice_model = alice.model_id
    as_alice = httpx.Client(
        base_url=f"{lab.tinker_url}/api/v1", headers={"X-API-Key": f"tml-{lab.admin_token}"}
    )
    alices_request = as_alice.post(
        "/optim_step", json={"model_id": alice_model, "adam_params": {"learning_rate": 0.0}}
    ).json()["request_id"]
    refusals = {
        "get_info": as_bob.post("/get_info", json={"model_id": alice_model}),
        "optim_step": as_bob.post(
            "/optim_step", json={"model_id": alice_model, "adam_params": {"learning_rate": 0.1}}
        ),
        "unload_model": as_bob.post("/unload_model", json={"model_id": alice_model}),
        "save_weights": as_bob.post("/save_weights", json={"model_id": alice_model, "path": "x"}),
        "retrieve_future": as_bob.post("/retrieve_future", json={"request_id": alices_request}),
        "load_weights": as_bob.post("/load_weights", json={"path": state, "optimizer": True}),
        "sampler_session": as_bob.post(
            "/create_sampling_session",
            json={"session_id": "s", "sampling_session_seq_id": 0, "model_path": sampler_path},
        ),
        "sampler": as_bob.get(f"/samplers/{sampler._sampling_session_id}"),
        "archive": as_bob.get("/checkpoint_archive", params={"path": state}),
        "checkpoints": as_bob.get(f"/training_runs/{alice_model}/checkpoints"),
    }
    assert {name: reply.status_code for name, reply in refusals.items()} == dict.fromkeys(
        refusals, 404
    )
    assert as_bob.get("/checkpoints").json() == {"checkpoints": []}
    as_bob.close()
    as_alice.close()
    refused = CliRunner().invoke(
        cli, ["lab", "export", state, "out", "--lab", lab.tinker_url, "--key", bob_token]
    )
    assert refused.exit_code == 1 and "No checkpoint" in refused.output, refused.output
    with pytest.raises(tinker.NotFoundError):
        service_client(lab, bob_token).create_training_client_from_state(state).result()
    # The same name under bob's own model is bob's, and alice's is untouched.
    bob_state = trainers["bob"].save_state("shared-name").result().path
    assert bob_state != state
    mine = httpx.get(
        f"{lab.tinker_url}/api/v1/checkpoints", headers={"X-API-Key": f"tml-{lab.admin_token}"}
    ).json()["checkpoints"]
    assert state in {c["tinker_path"] for c in mine} and bob_state not in {
        c["tinker_path"] for c in mine
    }


def test_a_restarted_hub_resumes_a_saved_model(tmp_path: Path, engine: TorchLabEngine) -> None:
    """The same SDK client carries on across a restart: its model comes back from its newest
    state checkpoint (weights and optimizer), its checkpoints are still there."""
    data = batch(engine)
    with serve_lab(tmp_path / "hub", engine) as first:
        token = first.add_user("carol", scopes=["train"])
        client = tinker.ServiceClient(base_url=first.tinker_url, api_key=f"tml-{token}")
        trainer = client.create_lora_training_client(base_model=BASE, rank=4).result()
        trainer.forward_backward(data, "cross_entropy").result()
        trainer.optim_step(types.AdamParams(learning_rate=1e-3)).result()
        path = trainer.save_state("before-restart").result().path
        before = trainer.forward(data, "cross_entropy").result()
    with serve_lab(tmp_path / "hub", engine, port=int(first.url.rsplit(":", 1)[1])) as second:
        second.clients.append(client)  # the same client, closed by the hub it ends on
        after = trainer.forward(data, "cross_entropy").result()
        assert after.metrics["loss:sum"] == pytest.approx(before.metrics["loss:sum"], abs=1e-4)
        trainer.forward_backward(data, "cross_entropy").result()
        trainer.optim_step(types.AdamParams(learning_rate=1e-3)).result()
        resumed = (
            service_client(second, token).create_training_client_from_state_with_optimizer(path)
        ).result()  # a new model from the checkpoint: its weights, not the step after
        again = resumed.forward(data, "cross_entropy").result()
        assert again.metrics["loss:sum"] == pytest.approx(before.metrics["loss:sum"], abs=1e-4)
        listed = httpx.get(
            f"{second.tinker_url}/api/v1/checkpoints", headers={"X-API-Key": f"tml-{token}"}
        ).json()["checkpoints"]
        assert [c["tinker_path"] for c in listed] == [path]
        rest = tinker.RestClient(base_url=second.tinker_url, api_key=f"tml-{token}")
        rest.delete_checkpoint_from_tinker_path(path).result()
        assert rest.list_user_checkpoints().result().checkpoints == []


def test_per_account_caps_refuse_with_a_message(tmp_path: Path, engine: TorchLabEngine) -> None:
    """A second live model over `max_models`, and a base model the Lab does not serve, are
    refused with what to do; unloading a model makes room."""
    with serve_lab(tmp_path / "hub", engine, LabLimits(max_models=1)) as hub:
        token = hub.add_user("erin", scopes=["train"])
        client = service_client(hub, token)
        first = client.create_lora_training_client(base_model=BASE, rank=2).result()
        with pytest.raises(tinker.BadRequestError, match="unload one"):
            client.create_lora_training_client(base_model=BASE, rank=2).result()
        with pytest.raises(tinker.BadRequestError, match="This Lab serves"):
            client.create_lora_training_client(base_model="Qwen/Qwen3-8B", rank=2).result()
        as_erin = {"X-API-Key": f"tml-{token}"}
        unload = httpx.post(
            f"{hub.tinker_url}/api/v1/unload_model",
            json={"model_id": first.model_id},
            headers=as_erin,
        ).json()["request_id"]
        done = httpx.post(
            f"{hub.tinker_url}/api/v1/retrieve_future",
            json={"request_id": unload},
            headers=as_erin,
            timeout=60,
        ).json()
        assert done == {"model_id": first.model_id, "type": "unload_model"}
        client.create_lora_training_client(base_model=BASE, rank=2).result()


def test_samplers_past_the_cap_sample_in_one_batch_then_reload_from_their_paths(
    tmp_path: Path, engine: TorchLabEngine
) -> None:
    """With room for one sampler, two made from saved paths still sample together (their
    weights are dropped only after the batch), and each again later (reloaded from its path);
    a snapshot past the cap is dropped, and says so."""
    with serve_lab(tmp_path / "hub", engine, LabLimits(max_samplers=1)) as hub:
        token = hub.add_user("heidi", scopes=["train"])
        client = service_client(hub, token)
        trainer = client.create_lora_training_client(base_model=BASE, rank=2).result()
        paths = [trainer.save_weights_for_sampler(name=f"s{i}").result().path for i in range(2)]
        samplers = [client.create_sampling_client(model_path=p).result() for p in paths]
        prompt = types.ModelInput.from_ints(engine.tokenizer.encode("Hello"))
        params = types.SamplingParams(max_tokens=3, temperature=0.0)
        for _ in range(2):
            pending = held(hub, lambda: [s.sample(prompt, 1, params) for s in samplers], 2)
            assert [len(p.result().sequences[0].tokens) for p in pending] == [3, 3]
        trainer.forward(batch(engine), "cross_entropy").result()  # queued after the eviction
        loaded = [s for s in hub.service._samplers.values() if s.loaded and s.adapter]
        assert len(loaded) == 1
        old = trainer.save_weights_and_get_sampling_client().result()
        trainer.save_weights_and_get_sampling_client().result()
        with pytest.raises(tinker.RequestFailedError, match="weights were dropped"):
            old.sample(prompt, 1, params).result()
