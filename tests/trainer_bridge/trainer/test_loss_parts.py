"""The loss as parts against values computed by hand: a batch mixing an `rl` sample (per-token
advantages, `opd`'s form) and a `ce` sample (a given trace's weights), each part normalised by
its own token count, and the gradient each token gets."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from trainer_bridge.config import LossConfig, TrainerConfig
from trainer_bridge.protocol.batches import TrainSample
from trainer_bridge.trainer.loss import LossStats, resolve_loss
from trainer_bridge.trainer.loss_parts import composed_loss, token_streams
from trainer_bridge.trainer.micro_batches import normaliser

pytestmark = pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad=True")

RL = TrainSample(
    input_ids=[1, 2, 3, 4],
    loss_mask=[0, 1, 1, 1],
    sampler_logprobs=[0.0, -1.0, -2.0, -0.5],
    advantage=0.0,
    advantages=[0.0, 0.5, -1.0, 2.0],
)
CE = TrainSample(
    input_ids=[1, 5, 6, 7],
    loss_mask=[0, 0, 1, 1],
    sampler_logprobs=[0.0] * 4,
    advantage=0.0,
    ce_weights=[0.0, 0.0, 1.0, 0.5],
)


def rows(values: list[list[Any]], dtype: torch.dtype) -> torch.Tensor:
    return torch.tensor(values, dtype=dtype)


def loss_of(
    samples: list[TrainSample], cfg: TrainerConfig, logprobs: torch.Tensor
) -> tuple[torch.Tensor, LossStats]:
    """The composed loss of `samples` (one micro-batch) at the policy's `logprobs`, and its stats."""
    return composed_loss(
        resolve_loss(cfg.loss),
        cfg.loss,
        normaliser(samples, cfg, 1),
        token_streams(samples, [s.loss_mask for s in samples], rows),
        logprobs=logprobs,
        sampler_logprobs=rows([s.sampler_logprobs for s in samples], torch.float32),
    )


def test_rl_and_ce_parts_each_divide_by_their_own_tokens() -> None:
    samples = [RL, CE]
    cfg = TrainerConfig()
    norm = normaliser(samples, cfg, 1)
    assert (norm.tokens, norm.sequences, norm.ce_tokens) == (3.0, 1.0, 2.0)
    # π_θ = μ on the rl row (ρ = 1): dapo's token loss is −A; the ce row's logprobs are its own
    logprobs = torch.tensor([[0.0, -1.0, -2.0, -0.5], [0.0, -3.0, -0.25, -4.0]], requires_grad=True)
    loss, stats = loss_of(samples, cfg, logprobs)
    rl = -(0.5 - 1.0 + 2.0) / 3
    ce = (0.25 * 1.0 + 4.0 * 0.5) / 2
    assert float(loss) == pytest.approx(rl + ce)
    assert (stats.tokens, stats.ce_tokens) == (3.0, 2.0)
    assert stats.ce_nll == pytest.approx(0.25 + 4.0)  # unweighted, for the ce_loss metric
    loss.backward()
    assert logprobs.grad is not None
    # d/d log π: −w·A/3 on rl tokens (w = ρ = 1), −weight/2 on ce tokens, 0 elsewhere
    expected = [[0.0, -0.5 / 3, 1.0 / 3, -2.0 / 3], [0.0, 0.0, -0.5, -0.25]]
    assert logprobs.grad.tolist() == [pytest.approx(r) for r in expected]


def test_a_batch_of_given_traces_has_no_rl_part() -> None:
    cfg = TrainerConfig(loss=LossConfig(type="grpo"))
    loss, stats = loss_of([CE], cfg, torch.tensor([[0.0, -3.0, -0.25, -4.0]], requires_grad=True))
    assert float(loss) == pytest.approx((0.25 + 2.0) / 2)
    assert stats.tokens == 0.0 and stats.mismatch_kl == 0.0


def test_samples_refuse_streams_of_another_length() -> None:
    with pytest.raises(ValueError, match=r"ce_weights \(2\) must have one entry per token \(4\)"):
        TrainSample.model_validate({**CE.model_dump(), "ce_weights": [0.0, 1.0]})
