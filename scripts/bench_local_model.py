#!/usr/bin/env python
"""Local model benchmark: `local/smollm2-135m` generation on CPU, ours vs plain transformers.

Both sides run the same model object (SmolLM2-135M-Instruct, fp32, one thread), the same
chat-templated prompts, greedy decoding, the same `max_tokens`; A/B interleaved, best of
`--reps`, load printed. Tokens/s counts the tokens each reply really has (up to its EOS).

* batch 1: one request at a time. Ours: `LocalClient.chat`. Peer: `model.generate` on one
  prompt (its KV cache on, as always).
* -c 8: eight concurrent requests, what a `prime eval run -c 8` hands the client. Ours: eight
  concurrent `LocalClient.chat` calls (the client batches them; the batch sizes it formed are
  printed). Peer at its best: one `model.generate` on the eight prompts left-padded into one
  batch (rather than eight sequential calls, which would flatter us).

Ratio = ours / peer tokens/s; the target is ≥ 1.0 at both. Tokens per CPU-second (this
process, all its threads) are printed too: on a shared, loaded machine wall time mostly
measures the neighbours, CPU time what each side costs.

Usage: `python scripts/bench_local_model.py [--max-tokens 64] [--reps 3] [--quick]`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from typing import Any

QUESTIONS = [
    "What is 17 + 25? Put the answer in \\boxed{}.",
    "Name three fruits that are red.",
    "What is 9 * 8?",
    "Spell the word 'garden' backwards.",
    "What is the capital of Italy?",
    "Write one sentence about the sea.",
    "What is 100 - 37?",
    "Give a synonym for 'happy'.",
]


def useful(tokens: list[int], eos: int) -> int:
    return tokens.index(eos) + 1 if eos in tokens else len(tokens)


def peer(model: Any, tok: Any, prompts: list[list[int]], max_tokens: int) -> int:
    """Plain transformers generate on these prompts as one left-padded batch; tokens made."""
    import torch

    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    with torch.inference_mode():
        out = model.generate(
            input_ids=ids,
            attention_mask=mask,
            max_new_tokens=max_tokens,
            do_sample=False,
            pad_token_id=pad,
        )
    return sum(useful(row.tolist(), tok.eos_token_id) for row in out[:, width:])


async def ours(client: Any, chats: list[list[dict[str, str]]], max_tokens: int) -> int:
    from prime_env.clients.base import SamplingArgs

    sampling = SamplingArgs(max_tokens=max_tokens, temperature=0.0)
    replies = await asyncio.gather(*(client.chat(c, sampling=sampling) for c in chats))
    return sum(len(r.completion_token_ids or []) for r in replies)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="CI check: 2 prompts, 8 tokens, 1 rep")
    args = parser.parse_args()
    questions, max_tokens, reps = QUESTIONS, args.max_tokens, args.reps
    if args.quick:
        questions, max_tokens, reps = QUESTIONS[:2], 8, 1

    from local_model.client import LocalClient
    from prime_env.chat_template import template_messages

    client = LocalClient("smollm2-135m")
    started = time.perf_counter()
    await client.ensure_loaded()
    print(f"model loaded in {time.perf_counter() - started:.1f} s; threads {client.threads}")
    model, tok = client._model, client._tokenizer
    chats = [[{"role": "user", "content": q}] for q in questions]
    prompts = [
        list(
            tok.apply_chat_template(
                template_messages(c), add_generation_prompt=True, tokenize=True, return_dict=False
            )
        )
        for c in chats
    ]
    best: dict[str, float] = {}
    best_cpu: dict[str, float] = {}
    loads = []
    for _ in range(reps):
        for mode in ("batch 1", "-c 8"):
            for side in ("ours", "peer"):
                loads.append(os.getloadavg()[0])
                t0, c0 = time.perf_counter(), time.process_time()
                if mode == "batch 1":
                    made = 0
                    for chat, prompt in zip(chats, prompts):
                        made += (
                            await ours(client, [chat], max_tokens)
                            if side == "ours"
                            else peer(model, tok, [prompt], max_tokens)
                        )
                else:
                    made = (
                        await ours(client, chats, max_tokens)
                        if side == "ours"
                        else peer(model, tok, prompts, max_tokens)
                    )
                rate = made / (time.perf_counter() - t0)
                cpu_rate = made / max(time.process_time() - c0, 1e-9)
                key = f"{mode} {side}"
                best[key] = max(best.get(key, 0.0), rate)
                best_cpu[key] = max(best_cpu.get(key, 0.0), cpu_rate)
    print(
        f"load (1-min avg) during the runs: {min(loads):.1f}–{max(loads):.1f} on {os.cpu_count()} CPUs"
    )
    print(f"batch sizes the client formed: {sorted(set(client.batches))}")
    for mode in ("batch 1", "-c 8"):
        o, p = best[f"{mode} ours"], best[f"{mode} peer"]
        oc, pc = best_cpu[f"{mode} ours"], best_cpu[f"{mode} peer"]
        print(
            f"{mode:8s} ours {o:7.1f} tok/s   transformers generate {p:7.1f} tok/s   "
            f"ratio {o / p:.2f}   (per CPU-second: {oc:.1f} vs {pc:.1f}, ratio {oc / pc:.2f})"
        )
    await client.aclose()


if __name__ == "__main__":
    asyncio.run(main())
