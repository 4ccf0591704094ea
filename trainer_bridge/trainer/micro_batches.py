"""A batch in micro-batches: packing by a padded-token budget, and the loss's global normalisers.

Every rank reads the whole batch, so the normalisers are counts over all of it and need no
communication (trainer/loss.py divides them by the world size).
"""

from __future__ import annotations

from trainer_bridge.config import TrainerConfig
from trainer_bridge.protocol.batches import TrainSample
from trainer_bridge.trainer.loss import Normaliser


def micro_batches(samples: list[TrainSample], budget: int) -> list[list[TrainSample]]:
    """Pack samples, longest first, into micro-batches of at most `budget` padded tokens
    (rows × longest row); a sample longer than the budget gets a micro-batch of its own."""
    ordered = sorted(samples, key=lambda s: len(s.input_ids), reverse=True)
    batches: list[list[TrainSample]] = []
    for sample in ordered:
        if batches and (len(batches[-1]) + 1) * len(batches[-1][0].input_ids) <= budget:
            batches[-1].append(sample)
        else:
            batches.append([sample])
    return batches


def effective_mask(sample: TrainSample, mask_truncated: bool) -> list[int]:
    return [0] * len(sample.loss_mask) if mask_truncated and sample.truncated else sample.loss_mask


def normaliser(samples: list[TrainSample], config: TrainerConfig, world_size: int) -> Normaliser:
    masks = [effective_mask(s, config.loss.mask_truncated) for s in samples]
    counts = [sum(m) for m in masks]
    constant = config.loss.norm_constant or max(counts, default=1)
    return Normaliser(
        tokens=float(sum(counts)),
        sequences=float(sum(1 for c in counts if c)),
        constant=float(constant),
        world_size=world_size,
    )
