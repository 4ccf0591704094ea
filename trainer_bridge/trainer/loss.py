"""The GRPO-family policy-gradient losses, on sampler logprobs μ (ρ = π_θ/μ per token).

All tensors are [rows, positions], right-padded; position i is about token i given its prefix.
ρ corrects for the sampler lagging the trainer (async) and for numerical sampler/trainer
mismatch. How ρ enters the objective is `loss.clip_against` (one rule, `policy_ratio`, for
every built-in loss and for custom ones):

- `proximal` (default), decoupled PPO (AReaL, Fu et al. 2025; Hilton et al. 2021): PPO's clip
  bounds r = π_θ/π_prox, the move away from the trainer's own policy at the start of the step,
  and the sampler is corrected by a separate detached weight w = min(π_prox/μ, is_cap). The
  trainer takes one optimizer step per batch, so π_prox = sg(π_θ): r = 1 where the gradient is
  taken and the gradient is w·A·∇log π_θ. A token the previous update made likelier (ρ > 1 at
  A=1) keeps its gradient instead of being clipped to zero.
- `sampler`, PPO on ρ itself with a dual clip for A < 0: in sync mode ρ ≈ 1 and the two
  agree; at A=1 every token whose ρ left [1−eps_low, 1+eps_high] in the clipped direction
  gets no gradient, which is exactly what the last update reinforced.

Every normaliser is a *global* count (all micro-batches, all ranks) divided by the world size:
each rank's gradient is then its share of the global mean, and FSDP's averaging over ranks
(÷ world size) gives exactly the one-process gradient.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from trainer_bridge.config import LossConfig


@dataclass(frozen=True)
class LossInputs:
    logprobs: Tensor
    """log π_θ of each token (tempered like the sampler), with grad."""
    sampler_logprobs: Tensor
    """log μ of each token, as the sampler reported it."""
    loss_mask: Tensor
    """1.0 on sampled tokens that are trained (truncated samples already removed if masked)."""
    advantages: Tensor
    """[rows, positions]: each token's advantage (a sequence's one advantage repeated, or
    `opd`'s per-token ones); [rows] (one per sequence) is accepted too."""
    ref_logprobs: Tensor | None = None
    """log π_ref (the base model) when kl_coef > 0."""
    entropy: Tensor | None = None
    """Entropy of π_θ at each position when entropy_coef > 0."""


@dataclass(frozen=True)
class Normaliser:
    """Global counts over the whole step's batch, and the number of ranks sharing it."""

    tokens: float
    """Σ loss_mask over the global batch."""
    sequences: float
    """Sequences with at least one loss token in the global batch."""
    constant: float
    """dr_grpo's per-sequence constant (e.g. max completion tokens)."""
    world_size: int = 1
    ce_tokens: float = 0.0
    """Σ loss_mask of the `ce` samples (given traces) over the global batch."""

    def per_rank(self, count: float) -> float:
        return max(count, 1.0) / self.world_size


@dataclass
class LossStats:
    """Sums over loss tokens; the trainer adds them across micro-batches and divides by tokens."""

    tokens: float = 0.0
    clipped: float = 0.0
    mismatch_kl: float = 0.0
    entropy: float = 0.0
    ref_kl: float = 0.0
    ce_tokens: float = 0.0
    ce_nll: float = 0.0
    """Σ −log π_θ over the `ce` tokens (unweighted)."""

    def add(self, other: LossStats) -> None:
        self.ce_tokens += other.ce_tokens
        self.ce_nll += other.ce_nll
        self.tokens += other.tokens
        self.clipped += other.clipped
        self.mismatch_kl += other.mismatch_kl
        self.entropy += other.entropy
        self.ref_kl += other.ref_kl


LossFn = Callable[[LossInputs, LossConfig, Normaliser], tuple[Tensor, LossStats]]


def k3(log_ratio: Tensor) -> Tensor:
    """Schulman's k3 estimator of KL from log(p/q) on samples of q: r − 1 − log r ≥ 0."""
    return torch.expm1(log_ratio) - log_ratio


@dataclass(frozen=True)
class PolicyRatio:
    """How ρ = π_θ/μ enters the objective: w · min(r·A, clip(r)·A)."""

    ratio: Tensor
    """r, with grad: what PPO's clip bounds."""
    weight: Tensor | None
    """w, detached: the truncated sampler correction (`proximal`); None under `sampler`."""
    capped: Tensor | None
    """Where w was truncated at `is_cap` (`proximal`)."""


def policy_ratio(log_rho: Tensor, cfg: LossConfig) -> PolicyRatio:
    """Split log ρ (with grad: per token, or a sequence's mean for GSPO) by `clip_against`."""
    if cfg.clip_against == "sampler":
        return PolicyRatio(torch.exp(log_rho), None, None)
    rho = torch.exp(log_rho.detach())
    cap = cfg.is_cap if cfg.is_cap is not None else float("inf")
    # π_prox = sg(π_θ): one optimizer step per batch, so no extra forward pass is needed
    return PolicyRatio(torch.exp(log_rho - log_rho.detach()), rho.clamp(max=cap), rho > cap)


def _clipped_objective(
    pr: PolicyRatio, advantages: Tensor, cfg: LossConfig
) -> tuple[Tensor, Tensor]:
    """PPO's clipped surrogate (asymmetric ε, DAPO's clip-higher), weighted by w (`proximal`)
    or dual-clipped at `is_cap`·A for A < 0 (`sampler`). Returns (objective, indicator of
    tokens whose gradient the clip or the cap changed)."""
    adv = advantages if advantages.dim() == 2 else advantages[:, None]
    unclipped = pr.ratio * adv
    clipped = pr.ratio.clamp(1 - cfg.eps_low, 1 + cfg.eps_high) * adv
    objective = torch.minimum(unclipped, clipped)
    was_clipped = clipped < unclipped
    if pr.weight is not None and pr.capped is not None:
        return pr.weight * objective, was_clipped | pr.capped
    if cfg.is_cap is not None:
        objective = torch.where(adv < 0, torch.maximum(objective, cfg.is_cap * adv), objective)
        was_clipped = was_clipped | ((adv < 0) & (pr.ratio > cfg.is_cap))
    return objective, was_clipped


def token_terms(inputs: LossInputs, cfg: LossConfig, log_rho: Tensor) -> tuple[Tensor, Tensor]:
    """Per-token loss (policy gradient + KL − entropy) and the clipped indicator, from log ρ
    (with grad); a custom loss calls this to share the built-ins' ratio rule."""
    objective, was_clipped = _clipped_objective(policy_ratio(log_rho, cfg), inputs.advantages, cfg)
    per_token = -objective
    if cfg.kl_coef > 0:
        if inputs.ref_logprobs is None:
            raise ValueError("kl_coef > 0 needs ref_logprobs")
        per_token = per_token + cfg.kl_coef * k3(inputs.ref_logprobs - inputs.logprobs)
    if cfg.entropy_coef > 0:
        if inputs.entropy is None:
            raise ValueError("entropy_coef > 0 needs entropy")
        per_token = per_token - cfg.entropy_coef * inputs.entropy
    return per_token, was_clipped


def _stats(inputs: LossInputs, was_clipped: Tensor) -> LossStats:
    mask = inputs.loss_mask
    with torch.no_grad():
        log_ratio = inputs.logprobs.detach() - inputs.sampler_logprobs
        return LossStats(
            tokens=float(mask.sum()),
            clipped=float((was_clipped.float() * mask).sum()),
            mismatch_kl=float((k3(log_ratio) * mask).sum()),
            entropy=float((inputs.entropy * mask).sum()) if inputs.entropy is not None else 0.0,
            ref_kl=float((k3(inputs.ref_logprobs - inputs.logprobs.detach()) * mask).sum())
            if inputs.ref_logprobs is not None
            else 0.0,
        )


def _token_log_ratio(inputs: LossInputs) -> Tensor:
    return inputs.logprobs - inputs.sampler_logprobs


def _per_sequence_mean(per_token: Tensor, mask: Tensor) -> Tensor:
    return (per_token * mask).sum(1) / mask.sum(1).clamp(min=1)


def dapo_loss(inputs: LossInputs, cfg: LossConfig, norm: Normaliser) -> tuple[Tensor, LossStats]:
    """Token-level: Σ over all loss tokens ÷ the global loss-token count (long answers weigh
    by their length, DAPO)."""
    per_token, was_clipped = token_terms(inputs, cfg, _token_log_ratio(inputs))
    loss = (per_token * inputs.loss_mask).sum() / norm.per_rank(norm.tokens)
    return loss, _stats(inputs, was_clipped)


def grpo_loss(inputs: LossInputs, cfg: LossConfig, norm: Normaliser) -> tuple[Tensor, LossStats]:
    """Sequence-level: each sequence's mean token loss, averaged over sequences (GRPO)."""
    per_token, was_clipped = token_terms(inputs, cfg, _token_log_ratio(inputs))
    loss = _per_sequence_mean(per_token, inputs.loss_mask).sum() / norm.per_rank(norm.sequences)
    return loss, _stats(inputs, was_clipped)


def dr_grpo_loss(inputs: LossInputs, cfg: LossConfig, norm: Normaliser) -> tuple[Tensor, LossStats]:
    """Σ token losses ÷ (sequences × a constant): no length bias either way (Dr. GRPO)."""
    per_token, was_clipped = token_terms(inputs, cfg, _token_log_ratio(inputs))
    total = (per_token * inputs.loss_mask).sum()
    loss = total / norm.per_rank(norm.sequences * norm.constant)
    return loss, _stats(inputs, was_clipped)


def gspo_loss(inputs: LossInputs, cfg: LossConfig, norm: Normaliser) -> tuple[Tensor, LossStats]:
    """Sequence ratio s = exp(mean log ρ), clipped (`sampler`) or capped (`proximal`) per
    sequence; the gradient reaches each token through s·π_θ/sg(π_θ) (GSPO)."""
    mask = inputs.loss_mask
    seq_log_ratio = (_token_log_ratio(inputs) * mask).sum(1) / mask.sum(1).clamp(min=1)
    log_rho = seq_log_ratio.detach()[:, None] + inputs.logprobs - inputs.logprobs.detach()
    per_token, was_clipped = token_terms(inputs, cfg, log_rho)
    loss = _per_sequence_mean(per_token, mask).sum() / norm.per_rank(norm.sequences)
    return loss, _stats(inputs, was_clipped)


BUILTIN: dict[str, LossFn] = {
    "dapo": dapo_loss,
    "grpo": grpo_loss,
    "dr_grpo": dr_grpo_loss,
    "gspo": gspo_loss,
}


def resolve_loss(cfg: LossConfig) -> LossFn:
    """The loss function `cfg.type` names; `custom` imports `module:function` (same signature)."""
    if cfg.type != "custom":
        return BUILTIN[cfg.type]
    module_name, _, attr = (cfg.import_path or "").partition(":")
    try:
        fn = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ValueError(
            f"loss.import_path {cfg.import_path!r} cannot be imported ({exc}); "
            "give 'package.module:function'"
        ) from exc
    if not callable(fn):
        raise TypeError(f"loss.import_path {cfg.import_path!r} is not a function")
    return fn  # type: ignore[no-any-return]
