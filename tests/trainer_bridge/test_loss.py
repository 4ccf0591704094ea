"""Each loss against tensors computed by hand (two sequences, three positions each)."""

from __future__ import annotations

import math

import pytest
import torch

from trainer_bridge.loss import LossInputs, Normaliser, k3, resolve_loss
from trainer_bridge.trainer_config import LossConfig

# Row 0: advantage +1, 2 loss tokens; row 1: advantage -1, 1 loss token (position 2 is padding).
MU = torch.tensor([[0.0, -1.0, -2.0], [0.0, -0.5, 0.0]])
LOG_RATIO = torch.tensor([[0.0, 0.5, -0.1], [0.0, 1.5, 0.0]])  # log π_θ − log μ
MASK = torch.tensor([[0.0, 1.0, 1.0], [0.0, 1.0, 0.0]])
ADV = torch.tensor([1.0, -1.0])
R = [math.exp(0.5), math.exp(-0.1), math.exp(1.5)]  # ρ of the three loss tokens


def inputs(**extra) -> LossInputs:
    logprobs = (MU + LOG_RATIO).requires_grad_(True)
    return LossInputs(logprobs, MU, MASK, ADV, **extra)


def norm(world_size: int = 1) -> Normaliser:
    return Normaliser(tokens=3, sequences=2, constant=4, world_size=world_size)


def token_losses(cfg: LossConfig) -> list[float]:
    """−min(ρA, clip(ρ)A), dual-clipped at is_cap·A for A < 0, by hand."""
    low, high = 1 - cfg.eps_low, 1 + cfg.eps_high
    out = []
    for rho, a in [(R[0], 1.0), (R[1], 1.0), (R[2], -1.0)]:
        obj = min(rho * a, min(max(rho, low), high) * a)
        if a < 0 and cfg.is_cap is not None:
            obj = max(obj, cfg.is_cap * a)
        out.append(-obj)
    return out


def test_dapo_normalises_by_global_tokens() -> None:
    cfg = LossConfig()
    loss, stats = resolve_loss(cfg)(inputs(), cfg, norm())
    # ρ0 = 1.65 clipped at 1.28; ρ1 = 0.905 unclipped; ρ2 = 4.48 with A<0 capped at 3
    assert token_losses(cfg) == pytest.approx([-1.28, -R[1], 3.0])
    assert float(loss) == pytest.approx(sum(token_losses(cfg)) / 3, rel=1e-6)
    assert stats.tokens == 3 and stats.clipped == 2
    # k3 = ρ − 1 − log ρ summed over the loss tokens (KL between sampler and trainer)
    assert stats.mismatch_kl == pytest.approx(
        sum(math.expm1(x) - x for x in (0.5, -0.1, 1.5)), rel=1e-6
    )


def test_world_size_scales_each_ranks_share() -> None:
    cfg = LossConfig()
    one, _ = resolve_loss(cfg)(inputs(), cfg, norm(1))
    two, _ = resolve_loss(cfg)(inputs(), cfg, norm(2))
    assert float(two) == pytest.approx(2 * float(one))  # FSDP then averages over 2 ranks


def test_grpo_is_mean_of_sequence_means() -> None:
    cfg = LossConfig(type="grpo")
    t = token_losses(cfg)
    loss, _ = resolve_loss(cfg)(inputs(), cfg, norm())
    assert float(loss) == pytest.approx(((t[0] + t[1]) / 2 + t[2]) / 2, rel=1e-6)


def test_dr_grpo_uses_a_constant_per_sequence() -> None:
    cfg = LossConfig(type="dr_grpo")
    loss, _ = resolve_loss(cfg)(inputs(), cfg, norm())
    assert float(loss) == pytest.approx(sum(token_losses(cfg)) / (2 * 4), rel=1e-6)


def test_gspo_clips_the_sequence_ratio() -> None:
    cfg = LossConfig(type="gspo", eps_low=0.1, eps_high=0.1, is_cap=None)
    # row 0: s = exp((0.5 - 0.1) / 2) = 1.22, clipped at 1.1 (A > 0)
    s1 = math.exp(1.5)  # A < 0: the unclipped −ρ branch is the min
    loss, stats = resolve_loss(cfg)(inputs(), cfg, norm())
    assert float(loss) == pytest.approx((-1.1 + s1) / 2, rel=1e-6)
    assert stats.clipped == 2  # both tokens of row 0
    (grad,) = torch.autograd.grad(resolve_loss(cfg)(x := inputs(), cfg, norm())[0], x.logprobs)
    # row 0 is clipped: no gradient; row 1's token gets −A·s1/2 (one token, two sequences)
    assert grad[0].abs().sum() == 0
    assert float(grad[1, 1]) == pytest.approx(s1 / 2, rel=1e-5)


def test_dapo_gradient_is_zero_where_clipped_and_masked() -> None:
    cfg = LossConfig()
    x = inputs()
    loss, _ = resolve_loss(cfg)(x, cfg, norm())
    (grad,) = torch.autograd.grad(loss, x.logprobs)
    assert float(grad[0, 1]) == 0.0  # clipped above (A > 0)
    assert float(grad[0, 2]) == pytest.approx(-R[1] / 3, rel=1e-5)  # d(−ρA)/dlogπ = −ρA
    assert float(grad[1, 1]) == 0.0  # dual-clipped (ρ > is_cap, A < 0)
    assert grad[:, 0].abs().sum() == 0 and float(grad[1, 2]) == 0.0


def test_kl_and_entropy_terms() -> None:
    ref = MU + torch.tensor([[0.0, 0.2, 0.0], [0.0, 1.0, 0.0]])
    entropy = torch.tensor([[0.0, 2.0, 1.0], [0.0, 3.0, 0.0]])
    cfg = LossConfig(kl_coef=0.5, entropy_coef=0.1)
    loss, stats = resolve_loss(cfg)(inputs(ref_logprobs=ref, entropy=entropy), cfg, norm())
    kls = [float(k3(torch.tensor(v))) for v in (0.2 - 0.5, 0.0 - (-0.1), 1.0 - 1.5)]
    expected = (sum(token_losses(cfg)) + 0.5 * sum(kls) - 0.1 * (2.0 + 1.0 + 3.0)) / 3
    assert float(loss) == pytest.approx(expected, rel=1e-6)
    assert stats.ref_kl == pytest.approx(sum(kls), rel=1e-5) and stats.entropy == 6.0


def custom_loss(inputs: LossInputs, cfg: LossConfig, norm: Normaliser):
    from trainer_bridge.loss import LossStats

    return -(inputs.logprobs * inputs.loss_mask).sum() / norm.tokens, LossStats(tokens=1)


def test_custom_import_path_and_bad_paths() -> None:
    cfg = LossConfig(type="custom", import_path=f"{__name__}:custom_loss")
    loss, _stats = resolve_loss(cfg)(inputs(), cfg, norm())
    assert float(loss) == pytest.approx(-float(((MU + LOG_RATIO) * MASK).sum()) / 3)
    with pytest.raises(ValueError, match="cannot be imported"):
        resolve_loss(LossConfig(type="custom", import_path="no_such_module:fn"))
    with pytest.raises(ValueError, match="needs loss.import_path"):
        LossConfig(type="custom")
