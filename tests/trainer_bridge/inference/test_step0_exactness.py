"""Acceptance 2: at step 0 the trainer's logprobs of what the sampler sampled equal the
sampler's own (SmolLM2-135M fp32, LoRA-wrapped as in training, T = 1 and T = 0.7):
mean k3 KL ≤ 1e-6 and max |Δ| ≤ 1e-3 over every sampled token of a batched generation."""

from __future__ import annotations

import asyncio

import pytest
import torch

from prime_env.clients.base import SamplingArgs
from tests.support import require
from tests.trainer_bridge.conftest import local_model_available
from trainer_bridge.config import ModelConfig
from trainer_bridge.inference.torch_backend import TorchBackend
from trainer_bridge.trainer.loss import k3
from trainer_bridge.trainer.modeling import add_lora, load_base, right_pad, token_logprobs

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

QUESTIONS = ["What is 17 + 25?", "Name three fruits.", "What is 9 * 8?", "Spell 'cat' backwards."]


async def mismatch(backend: TorchBackend, trainer_model: object, temperature: float):
    """(mean k3, max |Δ|, tokens) between the trainer's and the sampler's logprobs."""
    client = backend.client()
    sampling = SamplingArgs(max_tokens=32, temperature=temperature, seed=0)
    replies = await asyncio.gather(
        *(client.chat([{"role": "user", "content": q}], sampling=sampling) for q in QUESTIONS * 2)
    )
    sequences = [(r.prompt_token_ids or []) + (r.completion_token_ids or []) for r in replies]
    padded = right_pad(sequences, 2, torch.device("cpu"))
    with torch.no_grad():
        logprobs, _ = token_logprobs(
            trainer_model, padded.input_ids, padded.attention_mask, temperature=temperature
        )
    trainer_lp, sampler_lp = [], []
    for row, reply in enumerate(replies):
        start = len(reply.prompt_token_ids or [])
        n = len(reply.completion_token_ids or [])
        trainer_lp.extend(logprobs[row, start : start + n].tolist())
        sampler_lp.extend(reply.completion_logprobs or [])
    pi, mu = torch.tensor(trainer_lp, dtype=torch.float64), torch.tensor(sampler_lp)
    return float(k3(pi - mu).mean()), float((pi - mu).abs().max()), len(sampler_lp)


def test_step0_trainer_matches_sampler() -> None:
    require(local_model_available(), "the local model and peft (extra `train`)")
    cfg = ModelConfig()  # local/smollm2-135m, LoRA r16 on all projections, fp32 on CPU
    base, _ = load_base(cfg)  # the trainer's own copy, loaded apart from the sampler's
    trainer_model = add_lora(base, cfg)

    async def both() -> list[tuple[float, float, int]]:
        backend = TorchBackend(cfg)
        try:
            return [await mismatch(backend, trainer_model, t) for t in (1.0, 0.7)]
        finally:
            await backend.close()

    for temperature, (mean_kl, max_delta, tokens) in zip((1.0, 0.7), asyncio.run(both())):
        print(f"T={temperature}: {tokens} tokens, mean k3 {mean_kl:.3g}, max |Δ| {max_delta:.3g}")
        assert tokens > 50
        assert mean_kl <= 1e-6
        assert max_delta <= 1e-3
