"""The Lab's torch engine samples many requests in one batch, each as it would alone.

On the tiny SmolLM2-shaped model, two tenants' adapters (one trained on the attention and
MLP, one on the attention only, each a step away from the base) and the base model: requests
of all three, with their own temperatures, top-k/top-p, seeds, stop tokens and strings,
decode together and each gets the tokens, logprobs and stop reasons it gets alone (so no row
sees another's adapter); a request joining mid-batch too; a wrong request fails alone.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from hub_server.lab.engine import SampleCall
from tests.trainer_bridge.conftest import smollm2_tokenizer_dir, tiny_model_dir  # noqa: F401
from tests.trainer_bridge.lab.sampling import run, sequences
from trainer_bridge.lab.engine import Sampled, TorchLabEngine

pytestmark = pytest.mark.xdist_group("lab")


@pytest.fixture(scope="module")
def engine(tiny_model_dir: Path) -> TorchLabEngine:  # noqa: F811
    torch.manual_seed(0)
    engine = TorchLabEngine(str(tiny_model_dir))
    adam = {"beta1": 0.9, "beta2": 0.95, "eps": 1e-8, "weight_decay": 0.0, "grad_clip_norm": 0.0}
    for name, mlp, text in (("alice", True, "one two three"), ("bob", False, "a b c d e")):
        engine.create_adapter(name, 8 if mlp else 4, seed=1, train_mlp=mlp, train_attn=True)
        ids = np.array(engine.tokenizer.encode(text), dtype=np.int64)
        target = {"target_tokens": ids[1:]}
        engine.forward_backward(name, [ids[:-1]], [target], "cross_entropy", {}, False)
        engine.optim_step(name, {"learning_rate": 0.05, **adam})
    return engine


def call(
    engine: TorchLabEngine,
    adapter: str | None,
    text: str,
    n: int,
    stop_tokens: list[int] | None = None,
    stop_strings: list[str] | None = None,
    **params: float | None,
) -> SampleCall:
    prompt = engine.tokenizer.encode(text)
    values = {"max_tokens": 12, **params}
    return SampleCall(adapter, prompt, n, values, stop_tokens or [], stop_strings or [])


def assert_same(batched: list[Sampled], alone: list[Sampled]) -> None:
    assert [(t, stop) for t, _, stop in batched] == [(t, stop) for t, _, stop in alone]
    for (_, got, _), (_, want, _) in zip(batched, alone, strict=True):
        assert np.abs(np.array(got) - np.array(want)).max() < 1e-4


def test_requests_of_several_adapters_decode_together_as_each_alone(
    engine: TorchLabEngine,
) -> None:
    newline = engine.tokenizer.encode("\n")[-1]
    calls = [
        call(engine, "alice", "The capital of France is", 2),
        call(engine, "bob", "Once upon a time", 3, temperature=1.0, seed=5, top_k=20),
        call(engine, None, "The capital of France is", 1),
        call(engine, "alice", "1, 2, 3,", 2, temperature=0.8, top_p=0.9, seed=3),
        call(engine, "bob", "Hello", 1, stop_tokens=[newline], max_tokens=20),
        call(engine, "alice", "Hello", 1, stop_strings=["e"], temperature=1.0, seed=9),
    ]
    together = [sequences(o) for o in run(engine, calls)]
    alone = [sequences(run(engine, [c])[0]) for c in calls]
    for batched, own in zip(together, alone, strict=True):
        assert_same(batched, own)
    greedy = {c.adapter: tuple(s[0][0]) for c, s in zip(calls[:3], together, strict=False)}
    assert len(set(greedy.values())) == 3  # each adapter (and the base) decodes its own way
    # the logprobs are the adapter's own: what scoring prompt + tokens under it computes
    for c, batched in zip(calls, together, strict=True):
        for tokens, logprobs, _ in batched:
            scored = engine.prompt_logprobs(c.adapter, c.prompt + tokens)[-len(tokens) :]
            assert np.abs(np.array(scored) - np.array(logprobs)).max() < 1e-4
    assert len(together[1]) == 3 and len({tuple(t) for t, _, _ in together[1]}) > 1
    assert together[5][0][2] == "stop" and "e" in engine.tokenizer.decode(together[5][0][0])


def test_a_request_joining_mid_batch_gets_what_it_gets_alone_and_a_wrong_one_fails_alone(
    engine: TorchLabEngine,
) -> None:
    first = call(engine, "alice", "The capital of France is", 2, temperature=1.0, seed=1)
    joiner = call(engine, "bob", "Once upon a time, in a land", 2, temperature=1.0, seed=2)
    unknown = call(engine, "carol", "Hello", 1)
    too_long = call(engine, "bob", "Hello", 1, max_tokens=engine.max_context)
    outcomes = run(engine, [first, unknown], [joiner, too_long], join_at=3)
    assert isinstance(outcomes[1], ValueError) and "No adapter 'carol'" in str(outcomes[1])
    assert isinstance(outcomes[3], ValueError) and "exceeds the model's context" in str(outcomes[3])
    assert_same(sequences(outcomes[0]), sequences(run(engine, [first])[0]))
    assert_same(sequences(outcomes[2]), sequences(run(engine, [joiner])[0]))
