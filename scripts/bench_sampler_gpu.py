#!/usr/bin/env python
"""The torch sampler against transformers' `generate` at the same batch, on CUDA or CPU
(issue 34, item 7: the torch fallback on a GPU must reach `generate`'s tokens/s).

Both sides run the one model `prime train`'s torch backend samples with (the trainer's base
weights wrapped in its peft LoRA adapter, on the device and dtype training picks), the same
chat-templated arithmetic prompts and sampling (T, top-p 1, no top-k), A/B interleaved (the
order alternating), best of `--reps`, load printed.

* `served`: `--batch` concurrent `chat` calls into the backend's client (what rollouts do:
  its batching, worker thread and responses included) against one `model.generate` on the
  same prompts left-padded into one batch. Tokens are counted up to each reply's EOS.
* `steps`: the decode loop alone (`local_model.decode.decode`, EOS ignored) against
  `generate` with `min_new_tokens` = `max_new_tokens`: both make batch x max-tokens tokens, so
  the ratio is the per-step cost.

Ratio = ours / generate tokens/s (target >= 1.0). On CPU, tokens per CPU-second of this
process are printed beside: there the neighbours' load moves wall time, not CPU time.

Usage: `python scripts/bench_sampler_gpu.py [--device auto|cpu|cuda] [--batches 32,64]
[--max-tokens 64] [--reps 3] [--quick]`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def questions(count: int) -> list[str]:
    rng = random.Random(0)
    return [
        f"What is {rng.randint(1, 999)} + {rng.randint(1, 999)}? Put the answer in \\boxed{{}}."
        for _ in range(count)
    ]


def useful(tokens: list[int], eos: int) -> int:
    return tokens.index(eos) + 1 if eos in tokens else len(tokens)


def synchronize(model: Any) -> None:
    import torch

    if next(model.parameters()).device.type == "cuda":
        torch.cuda.synchronize()


def generate(
    model: Any, tok: Any, prompts: list[list[int]], max_tokens: int, temperature: float, fixed: bool
) -> int:
    """transformers' generate on the prompts as one left-padded batch; tokens made."""
    import torch

    device = next(model.parameters()).device
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts], device=device)
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=device)
    sampling: dict[str, Any] = (
        {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0}
        if temperature > 0
        else {"do_sample": False}
    )
    with torch.inference_mode():
        out = model.generate(
            input_ids=ids,
            attention_mask=mask,
            max_new_tokens=max_tokens,
            min_new_tokens=max_tokens if fixed else 0,
            pad_token_id=pad,
            **sampling,
        )
    synchronize(model)
    if fixed:
        return int(out[:, width:].numel())
    return sum(useful(row.tolist(), tok.eos_token_id) for row in out[:, width:])


def decode_steps(
    model: Any, tok: Any, prompts: list[list[int]], max_tokens: int, temperature: float
) -> int:
    """Our decode loop on the same rows, EOS ignored; tokens made."""
    from local_model.decode import Row, decode

    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    rows = [Row(p, max_tokens) for p in prompts]
    out = decode(model, rows, pad_id=pad, eos_id=-1, temperature=temperature)
    synchronize(model)
    return sum(len(t) for t, _ in out)


async def served(client: Any, chats: list[Any], max_tokens: int, temperature: float) -> int:
    from prime_env.clients.base import SamplingArgs

    sampling = SamplingArgs(max_tokens=max_tokens, temperature=temperature, top_p=1.0)
    replies = await asyncio.gather(*(client.chat(c, sampling=sampling) for c in chats))
    return sum(len(r.completion_token_ids or []) for r in replies)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="local/smollm2-135m")
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16"])
    parser.add_argument("--batches", default="32", help="comma-separated batch sizes")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--modes", default="served,steps")
    parser.add_argument("--quick", action="store_true", help="a check: batch 4, 8 tokens, 1 rep")
    args = parser.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    max_tokens, reps = args.max_tokens, args.reps
    if args.quick:
        batches, max_tokens, reps = [4], 8, 1

    import torch
    import transformers

    from prime_env.chat_template import prompt_ids
    from trainer_bridge.config import ModelConfig
    from trainer_bridge.inference.torch_backend import TorchBackend

    config = ModelConfig(name=args.model, device=args.device, dtype=args.dtype)
    backend = TorchBackend(config, max_batch=max(batches))
    client = backend.client()
    started = time.perf_counter()
    await client.ensure_loaded()
    model, tok = backend.model, backend.tokenizer
    device = next(model.parameters()).device
    print(
        f"{args.model} ({backend.dtype}, LoRA {config.lora is not None}) on {device} "
        f"({torch.cuda.get_device_name() if device.type == 'cuda' else f'{client.threads} thread'}"
        f"), loaded in {time.perf_counter() - started:.1f} s; torch {torch.__version__}, "
        f"transformers {transformers.__version__}"
    )
    chats = [[{"role": "user", "content": q}] for q in questions(max(batches))]
    prompts = [prompt_ids(tok, c, None) for c in chats]
    # warm-up (CUDA kernels, allocator): one short pass of each side
    generate(model, tok, prompts[:2], 4, args.temperature, fixed=True)
    decode_steps(model, tok, prompts[:2], 4, args.temperature)
    best: dict[tuple[str, int, str], tuple[float, float]] = {}
    loads = []
    for rep in range(reps):
        for batch in batches:
            for mode in args.modes.split(","):
                sides = ("ours", "generate") if rep % 2 == 0 else ("generate", "ours")
                for side in sides:
                    loads.append(os.getloadavg()[0])
                    t0, c0 = time.perf_counter(), time.process_time()
                    if side == "generate":
                        made = generate(
                            model, tok, prompts[:batch], max_tokens, args.temperature,
                            fixed=mode == "steps",
                        )  # fmt: skip
                    elif mode == "steps":
                        made = decode_steps(
                            model, tok, prompts[:batch], max_tokens, args.temperature
                        )
                    else:
                        made = await served(client, chats[:batch], max_tokens, args.temperature)
                    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
                    key = (mode, batch, side)
                    rate, cpu_rate = made / wall, made / max(cpu, 1e-9)
                    old = best.get(key, (0.0, 0.0))
                    best[key] = (max(old[0], rate), max(old[1], cpu_rate))
    print(
        f"load (1-min avg) during the runs: {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} CPUs"
    )
    print(f"batch sizes the client formed: {sorted(set(client.batches))}")
    for batch in batches:
        for mode in args.modes.split(","):
            (o, oc), (g, gc) = best[(mode, batch, "ours")], best[(mode, batch, "generate")]
            line = (
                f"{mode:6s} batch {batch:3d}: ours {o:8.1f} tok/s   generate {g:8.1f} tok/s   "
                f"ratio {o / g:.2f}"
            )
            if device.type == "cpu":
                line += f"   (per CPU-second {oc:.1f} vs {gc:.1f}, ratio {oc / gc:.2f})"
            print(line)
    await backend.close()


if __name__ == "__main__":
    asyncio.run(main())
