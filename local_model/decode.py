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

Rows of one batch may each name a LoRA adapter of a peft model (`Row.adapter`; `BASE` for
none): every forward pass then applies to each row its own adapter only (peft's mixed-adapter
batch), so several tenants' policies decode together on one copy of the base weights (the
Lab). A caller with its own sampling rule per row (temperature, top-k, seed, the logprobs it
reports) passes `pick`.
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


BASE = "__base__"
"""The adapter name of a row decoded by the base model alone (peft's)."""

Pick = Callable[[torch.Tensor, list[int]], tuple[torch.Tensor, torch.Tensor]]
"""(next-token logits of the rows decoding, their row numbers) -> (each row's token, the
logprob reported for it)."""


@dataclass(frozen=True)
class Row:
    prompt: list[int]
    limit: int
    stopped: Callable[[list[int]], bool] | None = None
    """Called with the tokens so far: True once a stop string has appeared."""
    adapter: str | None = None
    """The peft adapter that decodes this row (`BASE`: none); in a batch, every row names
    one or none does (the model as it stands)."""


def _adapters(rows: Sequence[Row]) -> list[str] | None:
    """The rows' adapter names for peft's `adapter_names`, or None where no row names one."""
    names = [r.adapter for r in rows]
    if all(n is None for n in names):
        return None
    if any(n is None for n in names):
        raise ValueError("in a batch, every row names its adapter (BASE for none) or none does")
    return [n for n in names if n is not None]


def _adapter_kw(names: list[str] | None) -> dict[str, list[str]]:
    return {} if names is None else {"adapter_names": names}


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
    where each row's next token goes, the padding mask (None: no row was padded) and the rows'
    adapters (None: none named)."""

    logits: torch.Tensor
    cache: Any
    next_position: torch.Tensor
    mask: torch.Tensor | None
    adapters: list[str] | None


SHARED_PREFIX_MIN = 16
"""Distinct prompts sharing at least this many leading tokens (a system prompt, tool schemas)
run those through the model once."""


def _prefill(model: Any, rows: Sequence[Row], pad_id: int, device: torch.device) -> _Prefill:
    """The prompts' forward pass, each distinct prompt once and their common head once: the
    rollouts of a group share their prompt, and the groups of a batch their system prompt and
    tool schemas, so those keys and values are copied, not computed again (the prompt is most
    of a tool-using turn's cost on CPU: docs/benchmarks.md "Engines"). Each row's remainder
    is right-aligned after the head; the columns between are masked out. A prompt is the
    same only under the same adapter, and a head is shared only when every row's adapter is."""
    from transformers import DynamicCache

    names = _adapters(rows)
    distinct: dict[tuple[str | None, tuple[int, ...]], int] = {}
    where = [distinct.setdefault((r.adapter, tuple(r.prompt)), len(distinct)) for r in rows]
    prompts = [list(p) for _, p in distinct]
    adapters = None if names is None else [a for a, _ in distinct if a is not None]
    cache = DynamicCache()
    cache_kw = {cache_keyword(model): cache}
    head = _common_head(prompts) if len({a for a, _ in distinct}) == 1 else 0
    if head:
        model(
            input_ids=torch.tensor([prompts[0][:head]], device=device),
            position_ids=torch.arange(head, device=device)[None],
            **cache_kw,
            **_adapter_kw(None if adapters is None else adapters[:1]),
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
        **_adapter_kw(adapters),
        use_cache=True,
        logits_to_keep=1,
    )
    logits, next_position = out.logits[:, -1], positions[:, -1] + 1
    if len(prompts) < len(rows):
        index = torch.tensor(where, device=device)
        cache.batch_select_indices(index)
        logits, next_position, mask = logits[index], next_position[index], mask[index]
    return _Prefill(logits, cache, next_position, mask if padded else None, names)


def _sampler(temperature: float, top_p: float, seed: int | None, device: torch.device) -> Pick:
    """Draws at `temperature` and `top_p` (greedy at 0), one generator for the batch, each
    token reported with its logprob under the distribution it was drawn from."""
    generator = None
    if seed is not None and temperature > 0:
        generator = torch.Generator(device=device).manual_seed(seed)

    def pick(logits: torch.Tensor, rows: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        logp = _processed(logits, temperature, top_p)
        if temperature > 0:
            chosen = torch.multinomial(logp.exp(), 1, generator=generator).squeeze(1)
        else:
            chosen = logp.argmax(-1)
        return chosen, logp.gather(1, chosen[:, None]).squeeze(1)

    return pick


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
    pick: Pick | None = None,
) -> list[tuple[list[int], list[float]]]:
    """Sample a completion for every row; return (token ids, logprobs) per row, in order.

    Tokens are drawn at `temperature` and `top_p` (seeded by `seed`), each reported with its
    processed logprob; or by `pick`, which then owns every row's sampling rule (and seeds).

    `should_stop` is asked before each forward pass; once it says True, `Stopped` is raised.
    A long batch runs in a worker thread that nothing else can interrupt, and the process
    cannot exit while that thread runs: this is how a shutdown gets it back within a token.

    `admit(active)`, asked between two tokens with the number of rows decoding, may give more
    rows: they are prefilled and join the batch (their keys and values aligned beside the
    others'), numbered after the rows before them; `finished(index, tokens, logprobs)` hears
    of each row as it ends, so its caller need not wait for the batch. Rows join only through
    `LlamaStep`, and with `seed` only through `pick` (a seeded batch's draws stay those of its
    first rows)."""
    global _sampled
    device = next(model.parameters()).device
    rows = list(rows)
    if pick is None:
        pick = _sampler(temperature, top_p, seed, device)
        if seed is not None and temperature > 0:
            admit = None
    tokens: list[list[int]] = [[] for _ in rows]
    logprobs: list[list[float]] = [[] for _ in rows]
    active = list(range(len(rows)))  # original row of each batch position
    if should_stop is not None and should_stop():
        raise Stopped
    with torch.inference_mode():
        first = _prefill(model, rows, pad_id, device)
        logits, cache, next_position, mask, adapters = (
            first.logits,
            first.cache,
            first.next_position,
            first.mask,
            first.adapters,
        )
        # None: every step through the forward pass
        step = LlamaStep.start(model, cache, mask, adapters=adapters)
        if step is None:
            admit = None
        while True:
            chosen, picked = pick(logits, active)
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
                    adapters = None if adapters is None else [adapters[b] for b in keep]
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
                    **_adapter_kw(adapters),
                    use_cache=True,
                ).logits[:, -1]
            next_position = next_position + 1
            joining = [] if admit is None else list(admit(len(active)))
            if joining:
                joined = _prefill(model, joining, pad_id, device)
                step.join(joined.cache, joined.mask, joined.adapters)  # type: ignore[union-attr]
                logits = torch.cat([logits, joined.logits])
                next_position = torch.cat([next_position, joined.next_position])
                active += range(len(rows), len(rows) + len(joining))
                rows += joining
                tokens += [[] for _ in joining]
                logprobs += [[] for _ in joining]
    return list(zip(tokens, logprobs))
