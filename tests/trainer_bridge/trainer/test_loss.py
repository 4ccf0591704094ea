"""Each loss against tensors computed by hand (two sequences, three positions each).

`sampler` (PPO on ρ = π_θ/μ) is checked first, then the default `proximal` (decoupled PPO):
the same at ρ ≈ 1 (sync), and w·A = min(ρ, is_cap)·A where `sampler` clips to zero (async)."""

from __future__ import annotations

import math

import pytest
import torch
from pydantic import ValidationError

from trainer_bridge.config import LossConfig
from trainer_bridge.trainer.loss import LossInputs, Normaliser, k3, resolve_loss

# The losses are compared by value (`float(loss)`) while they still carry their graph, which
# later lines differentiate; torch warns about that conversion, harmlessly here.
pytestmark = pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad=True")

# Row 0: advantage +1, 2 loss tokens; row 1: advantage -1, 1 loss token (position 2 is padding).
MU = torch.tensor([[0.0, -1.0, -2.0], [0.0, -0.5, 0.0]])
LOG_RATIO = torch.tensor([[0.0, 0.5, -0.1], [0.0, 1.5, 0.0]])  # log π_θ − log μ
MASK = torch.tensor([[0.0, 1.0, 1.0], [0.0, 1.0, 0.0]])
ADV = torch.tensor([1.0, -1.0])
R = [math.exp(0.5), math.exp(-0.1), math.exp(1.5)]  # ρ of the three loss tokens
PPO = {"clip_against": "sampler"}


def inputs(log_ratio: torch.Tensor = LOG_RATIO, **extra) -> LossInputs:
    logprobs = (MU + log_ratio).requires_grad_(True)
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
    cfg = LossConfig(**PPO)
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
    cfg = LossConfig(type="grpo", **PPO)
    t = token_losses(cfg)
    loss, _ = resolve_loss(cfg)(inputs(), cfg, norm())
    assert float(loss) == pytest.approx(((t[0] + t[1]) / 2 + t[2]) / 2, rel=1e-6)


def test_dr_grpo_uses_a_constant_per_sequence() -> None:
    cfg = LossConfig(type="dr_grpo", **PPO)
    loss, _ = resolve_loss(cfg)(inputs(), cfg, norm())
    assert float(loss) == pytest.approx(sum(token_losses(cfg)) / (2 * 4), rel=1e-6)


def test_gspo_clips_the_sequence_ratio() -> None:
    cfg = LossConfig(type="gspo", eps_low=0.1, eps_high=0.1, is_cap=None, **PPO)
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
    cfg = LossConfig(**PPO)
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
    cfg = LossConfig(kl_coef=0.5, entropy_coef=0.1, **PPO)
    loss, stats = resolve_loss(cfg)(inputs(ref_logprobs=ref, entropy=entropy), cfg, norm())
    kls = [float(k3(torch.tensor(v))) for v in (0.2 - 0.5, 0.0 - (-0.1), 1.0 - 1.5)]
    expected = (sum(token_losses(cfg)) + 0.5 * sum(kls) - 0.1 * (2.0 + 1.0 + 3.0)) / 3
    assert float(loss) == pytest.approx(expected, rel=1e-6)
    assert stats.ref_kl == pytest.approx(sum(kls), rel=1e-5) and stats.entropy == 6.0


def grad_of(cfg: LossConfig, log_ratio: torch.Tensor = LOG_RATIO) -> torch.Tensor:
    x = inputs(log_ratio)
    (grad,) = torch.autograd.grad(resolve_loss(cfg)(x, cfg, norm())[0], x.logprobs)
    return grad


def test_proximal_weights_each_token_by_truncated_rho() -> None:
    cfg = LossConfig()  # clip_against = "proximal", is_cap = 3
    assert cfg.clip_against == "proximal"
    loss, stats = resolve_loss(cfg)(inputs(), cfg, norm())
    # r = π_θ/sg(π_θ) = 1: the clip never binds; w = min(ρ, 3) = 1.65, 0.905, 3 (capped)
    assert float(loss) == pytest.approx((-R[0] - R[1] + 3.0) / 3, rel=1e-6)
    assert stats.clipped == 1  # only the capped weight (row 1), not ρ0 = 1.65 > 1.28
    grad = grad_of(cfg)
    # d(−w·r·A)/dlog π = −w·A
    assert grad[0, 1:].tolist() == pytest.approx([-R[0] / 3, -R[1] / 3], rel=1e-5)
    assert float(grad[1, 1]) == pytest.approx(3.0 / 3, rel=1e-5)
    assert grad[:, 0].abs().sum() == 0 and float(grad[1, 2]) == 0.0


def test_a_reinforced_token_keeps_its_gradient_under_proximal() -> None:
    """ρ = 1.5 with A > 0 (the last update made the token likelier; the sampler is one
    version behind): `sampler` clips it to zero gradient, `proximal` gives w·A = 1.5·A,
    and ρ = 5 is capped at is_cap·A."""
    log_ratio = torch.tensor([[0.0, math.log(1.5), math.log(5.0)], [0.0, 0.0, 0.0]])
    assert float(grad_of(LossConfig(**PPO), log_ratio)[0, 1]) == 0.0
    grad = grad_of(LossConfig(), log_ratio)
    assert float(grad[0, 1]) == pytest.approx(-1.5 * 1.0 / 3, rel=1e-5)
    assert float(grad[0, 2]) == pytest.approx(-3.0 * 1.0 / 3, rel=1e-5)
    uncapped = grad_of(LossConfig(is_cap=None), log_ratio)
    assert float(uncapped[0, 2]) == pytest.approx(-5.0 / 3, rel=1e-5)


@pytest.mark.parametrize("loss_type", ["dapo", "grpo", "dr_grpo", "gspo"])
def test_proximal_equals_sampler_when_rho_is_near_one(loss_type: str) -> None:
    """Sync (A=0): ρ differs from 1 only by sampler/trainer numerics, nothing clips, and the
    decoupled objective is the old one, value and gradient."""
    log_ratio = torch.tensor([[0.0, 2e-3, -1e-3], [0.0, 3e-3, 0.0]])
    old, new = LossConfig(type=loss_type, **PPO), LossConfig(type=loss_type)
    old_loss, old_stats = resolve_loss(old)(inputs(log_ratio), old, norm())
    new_loss, new_stats = resolve_loss(new)(inputs(log_ratio), new, norm())
    assert float(new_loss) == pytest.approx(float(old_loss), rel=1e-6)
    assert old_stats.clipped == new_stats.clipped == 0
    assert torch.allclose(grad_of(new, log_ratio), grad_of(old, log_ratio), rtol=1e-6)


def test_gspo_proximal_weights_the_sequence() -> None:
    cfg = LossConfig(type="gspo", eps_low=0.1, eps_high=0.1, is_cap=None)
    s0 = math.exp((0.5 - 0.1) / 2)  # clipped to no gradient under `sampler` (A > 0)
    grad = grad_of(cfg)
    # each of row 0's two tokens: −s0·A ÷ 2 tokens ÷ 2 sequences
    assert grad[0, 1:].tolist() == pytest.approx([-s0 / 4, -s0 / 4], rel=1e-5)
    assert float(grad[1, 1]) == pytest.approx(math.exp(1.5) / 2, rel=1e-5)


def test_clip_against_is_checked() -> None:
    with pytest.raises(ValidationError, match="clip_against"):
        LossConfig(clip_against="mu")  # type: ignore[arg-type]


def custom_loss(inputs: LossInputs, cfg: LossConfig, norm: Normaliser):
    from trainer_bridge.trainer.loss import LossStats

    return -(inputs.logprobs * inputs.loss_mask).sum() / norm.tokens, LossStats(tokens=1)


def test_custom_import_path_and_bad_paths() -> None:
    cfg = LossConfig(type="custom", import_path=f"{__name__}:custom_loss")
    loss, _stats = resolve_loss(cfg)(inputs(), cfg, norm())
    assert float(loss) == pytest.approx(-float(((MU + LOG_RATIO) * MASK).sum()) / 3)
    with pytest.raises(ValueError, match="cannot be imported"):
        resolve_loss(LossConfig(type="custom", import_path="no_such_module:fn"))
    with pytest.raises(ValueError, match="needs loss.import_path"):
        LossConfig(type="custom")
