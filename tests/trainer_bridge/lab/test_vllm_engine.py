"""The Lab with a vLLM server sampling (`prime hub serve --lab --lab-engine vllm`), on CPU.

One vLLM server for the module (a start costs 2-3 minutes on two cores), started as the hub
starts it (`start_vllm_lab`: raw logprobs, LoRA up to rank 8). Through the unchanged `tinker`
SDK, two tenants' adapters and a base sampler decode in one batch; greedily every request gets
the torch engine's tokens, and its logprobs (sampled and of the prompt) are the torch
engine's within 1e-3 (vLLM's CPU kernels sum in another order). Then the engine alone: stops,
a joiner and wrong requests as the torch engine takes them, and adapters hot-loaded under
names never reused and unloaded when they change or go.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest
from tinker import types

from hub_server.lab.engine import SampleCall
from tests.hub_server.lab.labhub import (
    BASE,
    LabHub,
    batch,
    batch_sizes,
    held,
    serve_lab,
    two_tenants_samplers,
)
from tests.support import require, vllm_installed
from tests.trainer_bridge.lab.sampling import run, sequences
from trainer_bridge.lab.vllm_engine import VLLMLabEngine, start_vllm_lab

MAX_RANK = 8
TOLERANCE = 1e-3


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VLLMLabEngine]:
    require(vllm_installed(), "the vLLM engine (prime engine install vllm)")
    log = tmp_path_factory.mktemp("vllm") / "vllm.log"
    lab = start_vllm_lab(BASE, max_lora_rank=MAX_RANK, log=log)
    try:
        lab.wait_ready()
        yield lab
    finally:
        lab.close()


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, engine: VLLMLabEngine) -> Iterator[LabHub]:
    with serve_lab(tmp_path_factory.mktemp("lab-hub"), engine) as hub:
        hub.admin_token = hub.add_user("alice")
        yield hub


def close(got: list[float], want: list[float]) -> None:
    assert len(got) == len(want)
    assert np.abs(np.array(got) - np.array(want)).max() < TOLERANCE


def served_adapters(engine: VLLMLabEngine) -> set[str]:
    models = httpx.get(f"{engine.url}/models").json()["data"]
    return {m["id"] for m in models} - {engine.served_name}


@pytest.mark.slow  # two tenants' training steps and samples on the CPU, both engines
def test_two_tenants_sample_in_one_batch_as_the_torch_engine_does(
    lab: LabHub, engine: VLLMLabEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    samplers = two_tenants_samplers(lab, batch(engine.trainer))
    prompt = engine.trainer.tokenizer.encode("The capital of France")
    model_input = types.ModelInput.from_ints(prompt)
    greedy = types.SamplingParams(max_tokens=8, temperature=0.0)
    seeded = types.SamplingParams(max_tokens=8, temperature=1.0, seed=11)

    batches = batch_sizes(engine, monkeypatch)
    pending = held(
        lab,
        lambda: [s.sample(model_input, 2, p) for s in samplers for p in (greedy, seeded)],
        6,
    )
    answers = [p.result().sequences for p in pending]
    assert batches == [6]
    adapters = [lab.service._samplers[s._sampling_session_id].adapter for s in samplers]
    greedy_answers, seeded_answers = answers[0::2], answers[1::2]
    for adapter, greedy_pair, seeded_pair in zip(
        adapters, greedy_answers, seeded_answers, strict=True
    ):
        call = SampleCall(adapter, prompt, 2, {"max_tokens": 8, "temperature": 0.0}, [], [])
        for vllm_greedy, (tokens, logprobs, _) in zip(
            greedy_pair, sequences(run(engine.trainer, [call])[0]), strict=True
        ):
            assert vllm_greedy.tokens == tokens
            close(vllm_greedy.logprobs or [], logprobs)
        assert seeded_pair[0].tokens != seeded_pair[1].tokens  # a request's rows, each its own
        for vllm_seeded in seeded_pair:
            scored = engine.trainer.prompt_logprobs(adapter, prompt + vllm_seeded.tokens)
            close(vllm_seeded.logprobs or [], scored[-len(vllm_seeded.tokens) :])
    assert len({tuple(seqs[0].logprobs or []) for seqs in greedy_answers}) == 3

    # the SDK's compute_logprobs: the prompt's logprobs, by the server
    text = prompt + greedy_answers[0][0].tokens
    computed = samplers[0].compute_logprobs(types.ModelInput.from_ints(text)).result()
    assert computed[0] is None
    close(
        [float(x) for x in computed[1:] if x is not None],
        engine.trainer.prompt_logprobs(adapters[0], text),
    )


@pytest.mark.slow  # greedy samples from both engines
def test_stops_joiners_and_wrong_requests_as_the_torch_engine_takes_them(
    engine: VLLMLabEngine,
) -> None:
    tokenizer = engine.trainer.tokenizer
    engine.create_adapter("stops", 4, seed=3, train_mlp=True, train_attn=True)
    ids = np.array(tokenizer.encode("one, two, three, four"), dtype=np.int64)
    target = [{"target_tokens": ids[1:]}]
    engine.forward_backward("stops", [ids[:-1]], target, "cross_entropy", {}, False)
    adam = {"beta1": 0.9, "beta2": 0.95, "eps": 1e-8, "weight_decay": 0.0, "grad_clip_norm": 0.0}
    engine.optim_step("stops", {"learning_rate": 0.02, **adam})

    def call(
        adapter: str | None,
        text: str,
        stop_tokens: list[int],
        stop_strings: list[str],
        **params: Any,
    ) -> SampleCall:
        values = {"max_tokens": 12, "temperature": 0.0, **params}
        return SampleCall(adapter, tokenizer.encode(text), 1, values, stop_tokens, stop_strings)

    ((free, _, _),) = sequences(run(engine.trainer, [call("stops", "one, two", [], [])])[0])
    stop = free[2]  # the third token of the free greedy answer ends the stopped one
    calls = [
        call("stops", "one, two", [stop], []),
        call(None, "Once upon a time", [], ["a"]),
        call("stops", "Hello", [], []),
    ]
    joiner = call(None, "The capital of France is", [], [], max_tokens=6)
    outcomes = run(engine, calls, [joiner])
    for got, want in zip(outcomes, [*(run(engine.trainer, [c])[0] for c in [*calls, joiner])]):
        ((tokens, logprobs, reason),) = sequences(got)
        ((want_tokens, want_logprobs, want_reason),) = sequences(want)
        assert (tokens, reason) == (want_tokens, want_reason)
        close(logprobs, want_logprobs)
    ((stopped, _, reason),) = sequences(outcomes[0])
    assert stopped == free[: free.index(stop) + 1] and reason == "stop"
    ((text, _, reason),) = sequences(outcomes[1])
    assert reason == "stop" and "a" in tokenizer.decode(text)
    assert sequences(outcomes[3])[0][2] == "length"

    wrong = [
        call("nobody", "Hello", [], []),
        call(None, "Hello", [], [], max_tokens=engine.max_context),
        call(None, "Hello", [], [], top_p=1.5),
    ]
    unknown, too_long, refused = run(engine, wrong)
    assert isinstance(unknown, ValueError) and "No adapter 'nobody'" in str(unknown)
    assert isinstance(too_long, ValueError) and "exceeds the model's context" in str(too_long)
    assert isinstance(refused, ValueError) and "vLLM refused" in str(refused)
    with pytest.raises(ValueError, match="above this Lab's largest, 8"):
        engine.create_adapter("wide", 16, seed=0, train_mlp=True, train_attn=True)


@pytest.mark.slow  # a few one-token samples
def test_adapters_load_under_names_never_reused_and_unload_when_they_change_or_go(
    engine: VLLMLabEngine,
) -> None:
    engine.create_adapter("names", 2, seed=0, train_mlp=False, train_attn=True)
    engine.copy_adapter("names", "snapshot")
    prompt = engine.trainer.tokenizer.encode("Hello")
    sample = SampleCall("snapshot", prompt, 1, {"max_tokens": 1}, [], [])
    before = served_adapters(engine)
    sequences(run(engine, [sample])[0])
    (first,) = served_adapters(engine) - before
    engine.load("snapshot", engine.save("names", optimizer=False), optimizer=False)
    assert first not in served_adapters(engine)
    scored = engine.prompt_logprobs("snapshot", prompt + prompt)
    (second,) = served_adapters(engine) - before
    assert second != first
    close(scored, engine.trainer.prompt_logprobs("snapshot", prompt + prompt))
    engine.delete_adapter("snapshot")
    engine.delete_adapter("names")
    assert served_adapters(engine) == before
    assert not (engine.exports / second).exists()
