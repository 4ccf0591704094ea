"""The torch backend on the tiny SmolLM2-shaped model: what it reports is what it sampled
(ids, tempered logprobs, stop strings), and a published policy is really the one served."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import torch

from prime_env.clients.base import SamplingArgs
from trainer_bridge.config import ModelConfig
from trainer_bridge.inference.base import InferenceBackend
from trainer_bridge.inference.torch_backend import TorchBackend
from trainer_bridge.protocol.policy import (
    PolicyError,
    Probe,
    probe_token_ids,
    read_policy,
    weights_file,
    write_policy,
)
from trainer_bridge.trainer.modeling import add_lora, load_base, right_pad, token_logprobs

CHAT = [{"role": "user", "content": "Count to five."}]


def teacher_forced(model, ids: list[int], temperature: float) -> list[float]:
    padded = right_pad([ids], 2, torch.device("cpu"))
    with torch.no_grad():
        lp, _ = token_logprobs(
            model, padded.input_ids, padded.attention_mask, temperature=temperature
        )
    return lp[0].tolist()


@pytest.mark.parametrize("temperature", [1.0, 0.7])
async def test_reported_logprobs_are_the_tempered_sampling_distribution(
    tiny_model_dir: Path, temperature: float
) -> None:
    backend = TorchBackend(ModelConfig(name=str(tiny_model_dir)))
    assert isinstance(backend, InferenceBackend)
    client = backend.client()
    sampling = SamplingArgs(max_tokens=12, temperature=temperature, seed=1)
    replies = await asyncio.gather(*(client.chat(CHAT, sampling=sampling) for _ in range(3)))
    for reply in replies:
        ids = (reply.prompt_token_ids or []) + (reply.completion_token_ids or [])
        want = teacher_forced(backend.model, ids, temperature)[len(reply.prompt_token_ids or []) :]
        got = reply.completion_logprobs or []
        assert len(got) == len(reply.completion_token_ids or []) > 0
        assert max(abs(a - b) for a, b in zip(got, want)) <= 1e-4
        assert reply.policy_version == 0
    await backend.close()


async def test_stop_string_cuts_the_ids_too(tiny_model_dir: Path) -> None:
    backend = TorchBackend(ModelConfig(name=str(tiny_model_dir)))
    client = backend.client()
    sampling = SamplingArgs(max_tokens=16, temperature=1.0, seed=3)
    free = await client.chat(CHAT, sampling=sampling)
    text = backend.tokenizer.decode(free.completion_token_ids, skip_special_tokens=True)
    start = next(i for i in range(len(text) // 3, len(text)) if text[i : i + 2].strip())
    stop = text[start : start + 2]
    sampling = SamplingArgs(max_tokens=16, temperature=1.0, seed=3, stop=[stop])
    cut = await client.chat(CHAT, sampling=sampling)
    ids = cut.completion_token_ids or []
    assert cut.finish_reason == "stop" and cut.message["content"] == text[: text.index(stop)]
    assert ids == (free.completion_token_ids or [])[: len(ids)]
    assert stop in backend.tokenizer.decode(ids) and stop not in backend.tokenizer.decode(ids[:-1])
    assert len(cut.completion_logprobs or []) == len(ids)
    await backend.close()


async def test_publish_swaps_the_adapter_and_the_probe_matches(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    cfg = ModelConfig(name=str(tiny_model_dir))
    base, tokenizer = load_base(cfg)
    trained = add_lora(base, cfg)
    with torch.no_grad():
        for name, param in trained.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.05)  # what a few optimizer steps would do
    ids = probe_token_ids(tokenizer)
    probe = Probe(ids, teacher_forced(trained, ids, 1.0)[1:])
    ref = write_policy(tmp_path, 1, trained, probe)
    assert ref.kind == "lora" and read_policy(ref.path) == (ref, probe)

    backend = TorchBackend(cfg)
    before = await backend.score(0, ids)
    assert max(abs(a - b) for a, b in zip(before, probe.logprobs)) > 1e-3  # the base differs
    await backend.publish(ref)
    assert backend.served_versions() == {1}
    after = await backend.score(1, ids)
    assert max(abs(a - b) for a, b in zip(after, probe.logprobs)) <= 1e-5
    reply = await backend.client().chat(CHAT, sampling=SamplingArgs(max_tokens=3))
    assert reply.policy_version == 1
    with pytest.raises(PolicyError, match="not served"):
        await backend.score(0, ids)
    with pytest.raises(PolicyError, match="never reused"):
        await backend.publish(ref)

    tampered = write_policy(tmp_path, 2, trained, probe)
    weights = weights_file(tampered)
    weights.write_bytes(weights.read_bytes()[:-8] + b"\0" * 8)
    with pytest.raises(PolicyError, match="sha256"):
        await backend.publish(tampered)
    assert backend.served_versions() == {1}
    await backend.close()
