"""Per-token logprobs: right padding changes nothing, chunking changes nothing, and the
tempered logprobs equal a plain full log-softmax on the tiny SmolLM2-shaped model."""

from __future__ import annotations

from pathlib import Path

import torch

from trainer_bridge.config import ModelConfig
from trainer_bridge.trainer.modeling import add_lora, load_base, right_pad, token_logprobs

SEQS = [[1, 520, 33, 907, 12, 2], [1, 44, 2], [7, 8, 9, 10, 11, 12, 13, 14, 15]]


def naive(model, seq: list[int], temperature: float) -> torch.Tensor:
    ids = torch.tensor([seq])
    logits = model(input_ids=ids).logits[0, :-1].float() / temperature
    return torch.log_softmax(logits, -1).gather(-1, ids[0, 1:, None]).squeeze(-1)


def test_padded_equals_unpadded_and_naive(tiny_model_dir: Path) -> None:
    model, _ = load_base(ModelConfig(name=str(tiny_model_dir)))
    padded = right_pad(SEQS, 2, torch.device("cpu"))
    with torch.no_grad():
        batch, entropy = token_logprobs(
            model,
            padded.input_ids,
            padded.attention_mask,
            temperature=0.7,
            chunk=5,
            with_entropy=True,
        )
        for row, seq in enumerate(SEQS):
            alone, _ = token_logprobs(
                model,
                torch.tensor([seq]),
                torch.ones(1, len(seq), dtype=torch.long),
                temperature=0.7,
            )
            assert (batch[row, : len(seq)] - alone[0]).abs().max() <= 1e-5
            assert (batch[row, 1 : len(seq)] - naive(model, seq, 0.7)).abs().max() <= 1e-5
            assert batch[row, 0] == 0 and batch[row, len(seq) :].abs().sum() == 0
    assert (entropy[:, 1:][padded.attention_mask[:, 1:].bool()] > 0).all()


def test_per_row_temperature_and_lora_gradients(tiny_model_dir: Path) -> None:
    cfg = ModelConfig(name=str(tiny_model_dir))
    base, _ = load_base(cfg)
    model = add_lora(base, cfg)
    padded = right_pad(SEQS[:2], 2, torch.device("cpu"))
    temps = torch.tensor([1.0, 0.5])
    logprobs, _ = token_logprobs(model, padded.input_ids, padded.attention_mask, temperature=temps)
    with torch.no_grad():
        assert (logprobs[1, 1:3] - naive(base, SEQS[1], 0.5)).abs().max() <= 1e-5
    logprobs.sum().backward()
    grads = [p.grad for n, p in model.named_parameters() if p.requires_grad]
    assert grads and all(g is not None for g in grads)
    assert sum(float(g.abs().sum()) for g in grads) > 0
    assert all(not p.requires_grad for n, p in model.named_parameters() if "lora_" not in n)


def test_only_restricts_the_head_to_the_given_positions(tiny_model_dir: Path) -> None:
    model, _ = load_base(ModelConfig(name=str(tiny_model_dir)))
    padded = right_pad(SEQS, 2, torch.device("cpu"))
    only = torch.zeros_like(padded.attention_mask, dtype=torch.bool)
    only[0, 3:5] = True
    only[2, 8] = True
    with torch.no_grad():
        full, _ = token_logprobs(model, padded.input_ids, padded.attention_mask)
        part, _ = token_logprobs(model, padded.input_ids, padded.attention_mask, only=only)
    # the same rows of the head, computed as a smaller matmul: equal up to float rounding
    torch.testing.assert_close(part[only], full[only], rtol=0, atol=1e-5)
    assert part[~only].abs().sum() == 0
