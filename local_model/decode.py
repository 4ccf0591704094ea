"""Batched sampling with a KV cache that retires rows as they finish.

`transformers`' `generate` keeps computing every row of a batch until the longest one ends;
in an eval most replies stop well before `max_tokens`, so a batch of 8 spends most of its
steps on rows that are already done. Here a row leaves the batch (and its cache) at its EOS,
its token limit or its stop string, and the remaining rows decode on; requests that arrive
meanwhile join between two tokens (continuous batching), so a batch never waits for its
longest row before new work starts.

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


@dataclass
class _Prefill:
    """A prompt forward pass over some rows: the logits of each row's first token, the cache,
    where each row's next token goes, and the padding mask (None: no row was padded)."""

    logits: torch.Tensor
    cache: Any
    next_position: torch.Tensor
    mask: torch.Tensor | None


SHARED_PREFIX_MIN = 16
"""Distinct prompts sharing at least this many leading tokens (a system prompt, tool schemas)
run those through the model once."""


def _prefill(model: Any, rows: Sequence[Row], pad_id: int, device: torch.device) -> _Prefill:
    """The prompts' forward pass, each distinct prompt once and their common head once: the
    rollouts of a group share their prompt, and the groups of a batch their system prompt and
    tool schemas, so those keys and values are copied, not computed again (the prompt is most
    of a tool-using turn's cost on CPU: docs/benchmarks.md "Engines"). Each row's remainder
    is right-aligned after the head; the columns between are masked out."""
    from transformers import DynamicCache

    distinct: dict[tuple[int, ...], int] = {}
    where = [distinct.setdefault(tuple(r.prompt), len(distinct)) for r in rows]
    prompts = [list(p) for p in distinct]
    cache = DynamicCache()
    cache_kw = {cache_keyword(model): cache}
    head = _common_head(prompts)
    if head:
        model(
            input_ids=torch.tensor([prompts[0][:head]], device=device),
            position_ids=torch.arange(head, device=device)[None],
            **cache_kw,
            use_cache=True,
            logits_to_keep=1,
        )
        cache.batch_select_indices(torch.zeros(len(prompts), dtype=torch.long, device=device))
    tails = [p[head:] for p in prompts]
    width = max(len(t) for t in tails)
    ids = torch.tensor([[pad_id] * (width - len(t)) + t for t in tails])
    mask = torch.tensor([[1] * head + [0] * (width - len(t)) + [1] * len(t) for t in tails])
    ids, mask = ids.to(device), mask.to(device)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)[:, head:]
    # Unpadded rows (always at batch 1) need no mask: the model then builds none per forward
    # pass (~1% of a token's CPU at 135M parameters), and its causal attention is the same.
    padded = any(len(t) < width for t in tails)
    out = model(
        input_ids=ids,
        attention_mask=mask if padded else None,
        position_ids=positions,
        **cache_kw,
        use_cache=True,
        logits_to_keep=1,
    )
    logits, next_position = out.logits[:, -1], positions[:, -1] + 1
    if len(prompts) < len(rows):
        index = torch.tensor(where, device=device)
        cache.batch_select_indices(index)
        logits, next_position, mask = logits[index], next_position[index], mask[index]
    return _Prefill(logits, cache, next_position, mask if padded else None)


def _common_head(prompts: list[list[int]]) -> int:
    """How many leading tokens all `prompts` share (0 below `SHARED_PREFIX_MIN`, or for one
    prompt); each keeps at least its last token for the pass that gives its logits."""
    if len(prompts) < 2:
        return 0
    head = min(len(p) for p in prompts) - 1
    first = prompts[0]
    for other in prompts[1:]:
        same = 0
        while same < head and first[same] == other[same]:
            same += 1
        head = same
    return head if head >= SHARED_PREFIX_MIN else 0


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
    admit: Callable[[int], Sequence[Row]] | None = None,
    finished: Callable[[int, list[int], list[float]], None] | None = None,
) -> list[tuple[list[int], list[float]]]:
    """Sample a completion for every row; return (token ids, logprobs) per row, in order.

    `should_stop` is asked before each forward pass; once it says True, `Stopped` is raised.
    A long batch runs in a worker thread that nothing else can interrupt, and the process
    cannot exit while that thread runs: this is how a shutdown gets it back within a token.

    `admit(active)`, asked between two tokens with the number of rows decoding, may give more
    rows: they are prefilled and join the batch (their keys and values aligned beside the
    others'), numbered after the rows before them; `finished(index, tokens, logprobs)` hears
    of each row as it ends, so its caller need not wait for the batch. Rows join only through
    `LlamaStep` and without a seed (a seeded batch's draws stay those of its first rows)."""
    global _sampled
    device = next(model.parameters()).device
    rows = list(rows)
    generator = None
    if seed is not None and temperature > 0:
        generator = torch.Generator(device=device).manual_seed(seed)
    tokens: list[list[int]] = [[] for _ in rows]
    logprobs: list[list[float]] = [[] for _ in rows]
    active = list(range(len(rows)))  # original row of each batch position
    if should_stop is not None and should_stop():
        raise Stopped
    with torch.inference_mode():
        first = _prefill(model, rows, pad_id, device)
        logits, cache, next_position, mask = (
            first.logits,
            first.cache,
            first.next_position,
            first.mask,
        )
        step = LlamaStep.start(model, cache, mask)  # None: every step through the forward pass
        if step is None or generator is not None:
            admit = None
        while True:
            logp = _processed(logits, temperature, top_p)
            if temperature > 0:
                chosen = torch.multinomial(logp.exp(), 1, generator=generator).squeeze(1)
            else:
                chosen = logp.argmax(-1)
            picked = logp.gather(1, chosen[:, None]).squeeze(1)
            # One copy to the host per token (on a GPU each is a wait for the step to finish):
            # token ids and float32 logprobs are both exact as float64.
            host_ids, host_logprobs = torch.stack((chosen.double(), picked.double())).tolist()
            _sampled += len(active)
            keep = []
            for b, row in enumerate(active):
                token = int(host_ids[b])
                tokens[row].append(token)
                logprobs[row].append(host_logprobs[b])
                spec = rows[row]
                done = token == eos_id or len(tokens[row]) >= spec.limit
                if not done and spec.stopped is not None and spec.stopped(tokens[row]):
                    done = True
                if not done:
                    keep.append(b)
                elif finished is not None:
                    finished(row, tokens[row], logprobs[row])
            if not keep:
                break
            if len(keep) < len(active):
                index = torch.tensor(keep, device=device)
                if step is None:
                    cache.batch_select_indices(index)
                    mask = None if mask is None else mask[index]
                else:
                    step.select(index)
                next_position, chosen = next_position[index], chosen[index]
                active = [active[b] for b in keep]
            if should_stop is not None and should_stop():
                raise Stopped
            if step is not None:
                logits = step(chosen[:, None], next_position[:, None])
            else:
                if mask is not None:
                    mask = torch.cat([mask, mask.new_ones((len(active), 1))], dim=1)
                logits = model(
                    input_ids=chosen[:, None],
                    attention_mask=mask,
                    position_ids=next_position[:, None],
                    **{cache_keyword(model): cache},
                    use_cache=True,
                ).logits[:, -1]
            next_position = next_position + 1
            joining = [] if admit is None else list(admit(len(active)))
            if joining:
                joined = _prefill(model, joining, pad_id, device)
                step.join(joined.cache, joined.mask)  # type: ignore[union-attr]
                logits = torch.cat([logits, joined.logits])
                next_position = torch.cat([next_position, joined.next_position])
                active += range(len(rows), len(rows) + len(joining))
                rows += joining
                tokens += [[] for _ in joining]
                logprobs += [[] for _ in joining]
    return list(zip(tokens, logprobs))
