"""The loss as parts, each normalised by its own global token count (prime-rl's layout):

- `rl`: the configured policy-gradient loss (trainer/loss.py) on the samples an algorithm
  gave advantages (`grpo`'s one per sequence, `opd`'s one per token);
- `ce`: cross-entropy on given traces (`sft`, `rft`), Σ w·(−log π_θ) ÷ the `ce` tokens;
- `ref_kl`: `loss.kl_coef`·k3 to the base model, on the `rl` tokens (inside the `rl` loss).

The trainer knows only tokens, masks, advantages and weights: which algorithm made a sample
is never read. A batch may mix both kinds; a part with no tokens adds 0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from trainer_bridge.config import LossConfig
from trainer_bridge.protocol.batches import TrainSample
from trainer_bridge.trainer.loss import LossFn, LossInputs, LossStats, Normaliser
from trainer_bridge.trainer.micro_batches import is_ce


@dataclass(frozen=True)
class TokenStreams:
    """A micro-batch's per-token tensors, [rows, positions]."""

    rl_mask: Tensor
    ce_weights: Tensor
    ce_mask: Tensor
    advantages: Tensor


def token_streams(
    samples: Sequence[TrainSample], masks: Sequence[Sequence[int]], rows: Callable[..., Tensor]
) -> TokenStreams:
    """The `rl` mask and advantages and the `ce` weights of `samples` (`masks`: their
    effective loss masks; `rows(values, dtype)` right-pads lists into a tensor)."""
    zero = [[0] * len(m) for m in masks]
    rl = [zero[i] if is_ce(s) else list(m) for i, (s, m) in enumerate(zip(samples, masks))]
    ce = [list(m) if is_ce(s) else zero[i] for i, (s, m) in enumerate(zip(samples, masks))]
    weights = [s.ce_weights if s.ce_weights is not None else z for s, z in zip(samples, zero)]
    advantages = [
        s.advantages if s.advantages is not None else [s.advantage] * len(s.input_ids)
        for s in samples
    ]
    ce_mask = rows(ce, torch.float32)
    return TokenStreams(
        rl_mask=rows(rl, torch.float32),
        ce_weights=rows(weights, torch.float32) * ce_mask,
        ce_mask=ce_mask,
        advantages=rows(advantages, torch.float32),
    )


def ce_part(logprobs: Tensor, streams: TokenStreams, norm: Normaliser) -> tuple[Tensor, LossStats]:
    """Σ w·(−log π_θ) over the `ce` tokens ÷ their global count (per rank, as the `rl` part)."""
    nll = -logprobs * streams.ce_mask
    loss = (nll * streams.ce_weights).sum() / norm.per_rank(norm.ce_tokens)
    stats = LossStats(ce_tokens=float(streams.ce_mask.sum()), ce_nll=float(nll.detach().sum()))
    return loss, stats


def composed_loss(
    loss_fn: LossFn,
    cfg: LossConfig,
    norm: Normaliser,
    streams: TokenStreams,
    **inputs: Any,
) -> tuple[Tensor, LossStats]:
    """The `rl` part (with its `ref_kl`) plus the `ce` part, and their statistics."""
    rl_inputs = LossInputs(loss_mask=streams.rl_mask, advantages=streams.advantages, **inputs)
    loss, stats = loss_fn(rl_inputs, cfg, norm)
    if norm.ce_tokens > 0:
        ce_loss, ce_stats = ce_part(rl_inputs.logprobs, streams, norm)
        loss = loss + ce_loss
        stats.add(ce_stats)
    return loss, stats
