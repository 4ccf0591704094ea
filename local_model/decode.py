"""Batched sampling with a KV cache that retires rows as they finish.

`transformers`' `generate` keeps computing every row of a batch until the longest one ends;
in an eval most replies stop well before `max_tokens`, so a batch of 8 spends most of its
steps on rows that are already done. Here a row leaves the batch (and its cache) at its EOS,
its token limit or its stop string, and the remaining rows decode on.

Each reported logprob is that of the sampled token under the distribution it was drawn from
(logits / temperature, then top-p), as vLLM's `processed_logprobs`. After the prompt's
forward pass, a Llama-architecture model decodes through `LlamaStep` (the same logits, less
CPU per token); any other through its own forward pass. Imported only when a local model
generates (it imports torch).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .llama_step import LlamaStep
from .transformers_compat import cache_keyword

_sampled = 0  # tokens sampled by this process since it started


class Stopped(Exception):
    """`decode` was told to stop between two tokens: nobody waits for this batch any more."""


def sampled_tokens() -> int:
    """Tokens sampled so far by this process: a live display reads it while a batch decodes,
    so its tokens/s moves during a generation instead of only when a reply completes."""
    return _sampled


@dataclass(frozen=True)
class Row:
    prompt: list[int]
    limit: int
    stopped: Callable[[list[int]], bool] | None = None
    """Called with the tokens so far: True once a stop string has appeared."""


def _processed(logits: torch.Tensor, temperature: float, top_p: float) -> torch.Tensor:
    scores = logits.float()
    if temperature > 0:
        scores = scores / temperature
    if top_p < 1.0:
        ordered, order = scores.sort(dim=-1, descending=True)
        probs = ordered.softmax(-1)
        drop = probs.cumsum(-1) - probs > top_p  # keep the smallest prefix reaching top_p
        ordered = ordered.masked_fill(drop, float("-inf"))
        scores = torch.full_like(scores, float("-inf")).scatter(-1, order, ordered)
    return torch.log_softmax(scores, dim=-1)


def decode(
    model: Any,
    rows: Sequence[Row],
    *,
    pad_id: int,
    eos_id: int,
    temperature: float,
    top_p: float = 1.0,
    seed: int | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> list[tuple[list[int], list[float]]]:
    """Sample a completion for every row; return (token ids, logprobs) per row, in order.

    `should_stop` is asked before each forward pass; once it says True, `Stopped` is raised.
    A long batch runs in a worker thread that nothing else can interrupt, and the process
    cannot exit while that thread runs: this is how a shutdown gets it back within a token."""
    global _sampled
    from transformers import DynamicCache

    device = next(model.parameters()).device
    width = max(len(r.prompt) for r in rows)
    ids = torch.tensor([[pad_id] * (width - len(r.prompt)) + r.prompt for r in rows])
    mask = torch.tensor([[0] * (width - len(r.prompt)) + [1] * len(r.prompt) for r in rows])
    ids, mask = ids.to(device), mask.to(device)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    generator = None
    if seed is not None and temperature > 0:
        generator = torch.Generator(device=device).manual_seed(seed)
    tokens: list[list[int]] = [[] for _ in rows]
    logprobs: list[list[float]] = [[] for _ in rows]
    active = list(range(len(rows)))  # original row of each batch position
    cache = DynamicCache()
    cache_kw = cache_keyword(model)
    if should_stop is not None and should_stop():
        raise Stopped
    # Unpadded rows (always at batch 1) need no mask: the model then builds none per forward
    # pass (~1% of a token's CPU at 135M parameters), and its causal attention is the same.
    padded = any(len(r.prompt) < width for r in rows)
    with torch.inference_mode():
        out = model(
            input_ids=ids,
            attention_mask=mask if padded else None,
            position_ids=positions,
            **{cache_kw: cache},
            use_cache=True,
            logits_to_keep=1,
        )
        logits = out.logits[:, -1]
        step = LlamaStep.start(model, cache)  # None: every step through the model's forward
        next_position = positions[:, -1] + 1
        while True:
            logp = _processed(logits, temperature, top_p)
            if temperature > 0:
                chosen = torch.multinomial(logp.exp(), 1, generator=generator).squeeze(1)
            else:
                chosen = logp.argmax(-1)
            picked = logp.gather(1, chosen[:, None]).squeeze(1).tolist()
            _sampled += len(active)
            keep = []
            for b, (row, token) in enumerate(zip(active, chosen.tolist())):
                tokens[row].append(token)
                logprobs[row].append(picked[b])
                spec = rows[row]
                finished = token == eos_id or len(tokens[row]) >= spec.limit
                if not finished and spec.stopped is not None and spec.stopped(tokens[row]):
                    finished = True
                if not finished:
                    keep.append(b)
            if not keep:
                break
            if len(keep) < len(active):
                index = torch.tensor(keep, device=device)
                if step is None:
                    cache.batch_select_indices(index)
                else:
                    step.select(index)
                mask, next_position, chosen = mask[index], next_position[index], chosen[index]
                active = [active[b] for b in keep]
            mask = torch.cat([mask, mask.new_ones((len(active), 1))], dim=1)
            if should_stop is not None and should_stop():
                raise Stopped
            if step is not None:
                logits = step(chosen[:, None], next_position[:, None], mask if padded else None)
            else:
                logits = model(
                    input_ids=chosen[:, None],
                    attention_mask=mask if padded else None,
                    position_ids=next_position[:, None],
                    **{cache_kw: cache},
                    use_cache=True,
                ).logits[:, -1]
            next_position = next_position + 1
    return list(zip(tokens, logprobs))
