"""A batch in micro-batches: packing by a padded-token budget, and the loss's global normalisers.

With `share_prefix`, the rollouts of one group that start with the same prompt go together,
and the decoder runs that prompt once for all of them (modeling.token_logprobs' `prefix_len`):
on a short-answer env the prompt is most of each sequence (arithmetic: ~50 prompt tokens,
~25 sampled), so the trainer's tokens per group drop by half or more. The samples left over (one per group:
an `sft` trace, a group of one) share what their prompts have in common, as the system prompt
and tool schemas of a tool env (wiki-search: ~470 of ~1,050 tokens). Every rank reads the
whole batch, so the normalisers are counts over all of it and need no communication
(trainer/loss.py divides them by the world size).
"""

from __future__ import annotations

from dataclasses import dataclass

from trainer_bridge.config import TrainerConfig
from trainer_bridge.protocol.batches import TrainSample
from trainer_bridge.trainer.loss import Normaliser

MIN_SHARED_PREFIX = 8
"""Shorter shared prompts are not worth a decoder pass of their own."""


@dataclass
class MicroBatch:
    """Samples run through the model together, within the token budget."""

    samples: list[TrainSample]
    prefix_len: int = 0
    """> 0: every sample starts with the same `prefix_len` tokens, run once."""


def prompt_len(sample: TrainSample) -> int:
    """Tokens before the first trained one (the prompt the rollout was sampled from)."""
    return next((i for i, m in enumerate(sample.loss_mask) if m), len(sample.loss_mask))


def micro_batches(
    samples: list[TrainSample], budget: int, *, share_prefix: bool = False
) -> list[MicroBatch]:
    """Pack samples into micro-batches of at most `budget` padded tokens (a sample longer than
    the budget gets one of its own). Shared-prefix micro-batches count the prefix once:
    prefix + rows × the longest remainder."""
    out: list[MicroBatch] = []
    rest = samples
    if share_prefix:
        buckets: dict[tuple[str, tuple[int, ...]], list[TrainSample]] = {}
        for sample in samples:
            n = prompt_len(sample)
            if MIN_SHARED_PREFIX <= n < len(sample.input_ids):
                buckets.setdefault((sample.group, tuple(sample.input_ids[:n])), []).append(sample)
        shared = [b for b in buckets.values() if len(b) > 1]
        taken = {id(s) for b in shared for s in b}
        rest = [s for s in samples if id(s) not in taken]
        for bucket in shared:
            out += _shared(bucket, prompt_len(bucket[0]), budget)
        common = _common_prompt(rest)
        if len(rest) > 1 and common >= MIN_SHARED_PREFIX:
            return out + _shared(rest, common, budget)
    ordered = sorted(rest, key=lambda s: len(s.input_ids), reverse=True)
    packed: list[list[TrainSample]] = []
    for sample in ordered:
        if packed and (len(packed[-1]) + 1) * len(packed[-1][0].input_ids) <= budget:
            packed[-1].append(sample)
        else:
            packed.append([sample])
    return out + [MicroBatch(group) for group in packed]


def _common_prompt(samples: list[TrainSample]) -> int:
    """How many first tokens every sample has in common, within each one's prompt."""
    if not samples:
        return 0
    limit = min(min(prompt_len(s), len(s.input_ids) - 1) for s in samples)
    first = samples[0].input_ids
    for i in range(limit):
        if any(s.input_ids[i] != first[i] for s in samples):
            return i
    return limit


def _shared(bucket: list[TrainSample], prefix: int, budget: int) -> list[MicroBatch]:
    ordered = sorted(bucket, key=lambda s: len(s.input_ids), reverse=True)
    out: list[MicroBatch] = []
    for sample in ordered:
        if out:
            rows = out[-1].samples
            longest = len(rows[0].input_ids) - prefix
            if prefix + (len(rows) + 1) * longest <= budget:
                rows.append(sample)
                continue
        out.append(MicroBatch([sample], prefix))
    for batch in out:  # a lone row has nothing to share
        if len(batch.samples) == 1:
            batch.prefix_len = 0
    return out


def effective_mask(sample: TrainSample, mask_truncated: bool) -> list[int]:
    return [0] * len(sample.loss_mask) if mask_truncated and sample.truncated else sample.loss_mask


def normaliser(samples: list[TrainSample], config: TrainerConfig, world_size: int) -> Normaliser:
    """The `rl` part's counts over the samples it trains, the `ce` part's over the given traces:
    each part is normalised by its own global token count (trainer/loss_parts.py)."""
    rl = [sum(effective_mask(s, config.loss.mask_truncated)) for s in samples if not is_ce(s)]
    ce = [s.num_loss_tokens for s in samples if is_ce(s)]
    constant = config.loss.norm_constant or max(rl, default=1)
    return Normaliser(
        tokens=float(sum(rl)),
        sequences=float(sum(1 for c in rl if c)),
        constant=float(constant),
        world_size=world_size,
        ce_tokens=float(sum(ce)),
    )


def is_ce(sample: TrainSample) -> bool:
    """A given trace's sample: it feeds the `ce` part, never the policy gradient."""
    return sample.ce_weights is not None
