"""A batch's samples as Tinker datums, so the Lab's summed token losses are the run's loss.

The Lab's losses are sums over tokens: `importance_sampling` (−ρ·A, ρ = π_θ/μ),
`ppo` (−min(ρ·A, clip(ρ)·A)) and `cross_entropy` (−w·log π_θ). Each is linear in its
per-token advantage or weight, so the run's normalisation goes into them:

- `dapo`: A ÷ the batch's loss tokens; `grpo`: A ÷ (the sequence's loss tokens × sequences);
  `dr_grpo`: A ÷ (sequences × the constant) — trainer/loss.py's normalisers
  (`micro_batches.normaliser`), per token;
- `clip_against = "proximal"` is `importance_sampling` (its gradient w·A·∇log π_θ with w = ρ,
  uncapped: `is_cap` is not applied); `"sampler"` is `ppo` with the clip range
  [1 − eps_low, 1 + eps_high] (no dual clip);
- given traces (`sft`, `rft`: `ce_weights`) are `cross_entropy` with w ÷ the `ce` tokens.

π_θ and μ are both the model's own logprobs (the Lab's forward and its sampler compute them
before temperature), so at a sampling temperature other than 1 the gradient is that of
log π, not of the tempered log π_T the local trainer uses (docs/lab.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from trainer_bridge.config import ConfigError, LossConfig, TrainerConfig
from trainer_bridge.protocol.batches import TrainSample
from trainer_bridge.trainer.micro_batches import effective_mask, is_ce, normaliser

SERVED_LOSSES = ("dapo", "grpo", "dr_grpo")


def check_loss(loss: LossConfig, where: str = "the run") -> None:
    """Refuse (ConfigError) a loss the Lab's built-in losses cannot compute."""
    if loss.type not in SERVED_LOSSES:
        raise ConfigError(
            f"--lab: trainer.loss.type = {loss.type!r} in {where} is not served; the Lab's "
            f"token losses compute {', '.join(SERVED_LOSSES)}"
        )
    for key in ("kl_coef", "entropy_coef"):
        if getattr(loss, key) > 0:
            raise ConfigError(
                f"--lab: trainer.loss.{key} > 0 in {where} is not served (the Lab's losses "
                "have no KL or entropy term); set it to 0"
            )


@dataclass
class LabDatum:
    """One sequence for the Lab: its input ids, its `loss_fn_inputs` arrays, and (for an `rl`
    datum) the loss positions the trainer's mismatch metric sums over."""

    tokens: list[int]
    inputs: dict[str, np.ndarray]
    mask: np.ndarray | None = None


@dataclass
class LabBatch:
    """A batch as the Lab's calls: the `rl` datums (one loss), the `ce` datums, and per datum
    what the trainer's metrics need (the sampler's logprobs and the loss positions)."""

    loss_fn: str
    loss_config: dict[str, float]
    rl: list[LabDatum] = field(default_factory=list)
    ce: list[LabDatum] = field(default_factory=list)
    rl_tokens: float = 0.0
    ce_tokens: float = 0.0


def lab_batch(samples: list[TrainSample], tc: TrainerConfig) -> LabBatch:
    """The Lab's datums for a batch trained with `tc`'s loss."""
    loss = tc.loss
    norm = normaliser(samples, tc, 1)
    if loss.clip_against == "proximal":
        batch = LabBatch("importance_sampling", {})
    else:
        low, high = 1.0 - loss.eps_low, 1.0 + loss.eps_high
        batch = LabBatch("ppo", {"clip_low_threshold": low, "clip_high_threshold": high})
    batch.rl_tokens, batch.ce_tokens = norm.tokens, norm.ce_tokens
    for sample in samples:
        if len(sample.input_ids) < 2:
            continue
        mask = np.asarray(effective_mask(sample, loss.mask_truncated)[1:], dtype=np.float32)
        if not mask.any():
            continue
        ids = sample.input_ids
        if is_ce(sample):
            weights = np.asarray((sample.ce_weights or [])[1:], dtype=np.float32) * mask
            inputs = {"target_tokens": _ids(ids[1:]), "weights": weights / max(norm.ce_tokens, 1)}
            batch.ce.append(LabDatum(ids[:-1], inputs))
            continue
        per_token = sample.advantages or [sample.advantage] * len(ids)
        scale = _scale(loss.type, float(mask.sum()), norm.tokens, norm.sequences, norm.constant)
        inputs = {
            "target_tokens": _ids(ids[1:]),
            "logprobs": np.asarray(sample.sampler_logprobs[1:], dtype=np.float32),
            "advantages": np.asarray(per_token[1:], dtype=np.float32) * mask * scale,
        }
        batch.rl.append(LabDatum(ids[:-1], inputs, mask))
    return batch


def _scale(kind: str, own: float, tokens: float, sequences: float, constant: float) -> float:
    """The factor trainer/loss.py divides a sequence's token losses by."""
    if kind == "dapo":
        return 1.0 / max(tokens, 1.0)
    if kind == "grpo":
        return 1.0 / (max(own, 1.0) * max(sequences, 1.0))
    return 1.0 / max(sequences * constant, 1.0)


def _ids(values: list[int]) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


def chunks(datums: list[LabDatum], budget: int) -> list[list[LabDatum]]:
    """Consecutive datums in calls of at most `budget` padded tokens (rows × the longest;
    one datum alone may exceed it): the Lab runs each call as one forward."""
    out: list[list[LabDatum]] = []
    current: list[LabDatum] = []
    longest = 0
    for datum in datums:
        length = len(datum.tokens)
        if current and (len(current) + 1) * max(longest, length) > budget:
            out.append(current)
            current, longest = [], 0
        current.append(datum)
        longest = max(longest, length)
    if current:
        out.append(current)
    return out
