"""A batch as the Lab's datums: the Lab's summed token losses give the local loss and gradient.

For each served loss the Lab's own per-token loss (trainer_bridge.lab.engine, the function its
forward_backward sums) on the datums' inputs is compared with trainer/loss.py's on the same
samples and logprobs: equal values and equal gradients. Unserved losses are refused by name.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from trainer_bridge.config import ConfigError, LossConfig, TrainerConfig
from trainer_bridge.lab.datums import LabDatum, check_loss, chunks, lab_batch
from trainer_bridge.lab.engine import _token_loss
from trainer_bridge.protocol.batches import TrainSample
from trainer_bridge.trainer.loss import LossInputs, resolve_loss
from trainer_bridge.trainer.micro_batches import normaliser


def sample(n: int, advantage: float, *, seed: int, ce: bool = False) -> TrainSample:
    rng = np.random.default_rng(seed)
    mask = [0, 0] + [1] * (n - 2)
    return TrainSample(
        input_ids=[int(x) for x in rng.integers(3, 50, n)],
        loss_mask=mask,
        sampler_logprobs=[float(-x) * m for x, m in zip(rng.uniform(0.1, 2, n), mask)],
        advantage=advantage,
        ce_weights=[float(m) for m in mask] if ce else None,
    )


def lab_loss(datums: list[LabDatum], loss_fn: str, config: dict[str, float],
             logp: list[torch.Tensor]) -> torch.Tensor:  # fmt: skip
    total = torch.zeros(())
    for datum, lp in zip(datums, logp, strict=True):
        total = (
            total + _token_loss(loss_fn, lp[1:], datum.inputs, config, torch.device("cpu")).sum()
        )
    return total


@pytest.mark.parametrize("kind", ["dapo", "grpo", "dr_grpo"])
@pytest.mark.parametrize("clip_against", ["proximal", "sampler"])
def test_the_labs_summed_loss_is_the_runs_loss(kind: str, clip_against: str) -> None:
    samples = [sample(7, 1.0, seed=1), sample(5, -0.5, seed=2), sample(9, 0.25, seed=3)]
    cfg = LossConfig(type=kind, clip_against=clip_against, is_cap=None)  # type: ignore[arg-type]
    tc = TrainerConfig(loss=cfg)
    batch = lab_batch(samples, tc)
    # π_θ near μ (inside the clip range, as one step's policy is)
    base = [torch.tensor(s.sampler_logprobs) for s in samples]
    logp = [(b + 0.05 * torch.randn(len(b)) * torch.tensor(s.loss_mask)).requires_grad_()
            for b, s in zip(base, samples)]  # fmt: skip
    ours = lab_loss(batch.rl, batch.loss_fn, batch.loss_config, logp)
    ours_grad = torch.autograd.grad(ours, logp)

    width = max(len(s.input_ids) for s in samples)

    def rows(values: list[list[float]] | list[torch.Tensor]) -> torch.Tensor:
        out = torch.zeros(len(values), width)
        for i, v in enumerate(values):
            out[i, : len(v)] = torch.as_tensor(v) if not isinstance(v, torch.Tensor) else v
        return out

    inputs = LossInputs(
        logprobs=rows(logp),  # type: ignore[arg-type]
        sampler_logprobs=rows([s.sampler_logprobs for s in samples]),
        loss_mask=rows([[float(m) for m in s.loss_mask] for s in samples]),
        advantages=rows([[s.advantage] * len(s.input_ids) for s in samples]),
    )
    theirs, _ = resolve_loss(cfg)(inputs, cfg, normaliser(samples, tc, 1))
    theirs_grad = torch.autograd.grad(theirs, logp)
    assert float(ours.detach()) == pytest.approx(float(theirs.detach()), rel=1e-5, abs=1e-7)
    for a, b in zip(ours_grad, theirs_grad, strict=True):
        assert torch.allclose(a, b, atol=1e-6)


def test_given_traces_are_cross_entropy_over_their_own_tokens() -> None:
    samples = [sample(6, 0.0, seed=4, ce=True), sample(4, 0.0, seed=5, ce=True)]
    batch = lab_batch(samples, TrainerConfig())
    assert not batch.rl and len(batch.ce) == 2 and batch.ce_tokens == 6
    weights = np.concatenate([d.inputs["weights"] for d in batch.ce])
    assert weights.sum() == pytest.approx(1.0)  # Σ w ÷ the ce tokens
    assert batch.ce[0].tokens == samples[0].input_ids[:-1]


def test_ppo_carries_the_clip_range() -> None:
    cfg = LossConfig(clip_against="sampler", eps_low=0.1, eps_high=0.3)
    batch = lab_batch([sample(5, 1.0, seed=6)], TrainerConfig(loss=cfg))
    assert batch.loss_fn == "ppo"
    assert batch.loss_config == pytest.approx(
        {"clip_low_threshold": 0.9, "clip_high_threshold": 1.3}
    )


@pytest.mark.parametrize(
    ("loss", "named"),
    [
        (LossConfig(type="gspo"), "gspo"),
        (LossConfig(kl_coef=0.1), "kl_coef"),
        (LossConfig(entropy_coef=0.01), "entropy_coef"),
    ],
)
def test_what_the_lab_cannot_compute_is_refused_by_name(loss: LossConfig, named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        check_loss(loss)


def test_calls_hold_at_most_the_token_budget() -> None:
    datums = [LabDatum([0] * n, {}) for n in (10, 10, 30, 5, 5)]
    parts = chunks(datums, 40)
    assert [len(p) for p in parts] == [2, 1, 2]
    assert chunks([LabDatum([0] * 100, {})], 40) == [[LabDatum([0] * 100, {})]]
