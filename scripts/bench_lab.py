#!/usr/bin/env python
"""Lab benchmark: training steps/s of 1, 2 and 4 concurrent tenants against one tenant alone,
and sampling throughput of 1, 2 and 4 concurrent tenants, batched against one row at a time.

One hub with a Lab (local/smollm2-135m, fp32, CPU) served on loopback from this process; each
tenant is its own hub user with a `train` token, driving the unchanged `tinker` SDK from a
thread of its own: a LoRA (rank 8) training client, then `--steps` steps of forward_backward
(`cross_entropy`, a fixed batch of 2 sequences) + optim_step. Printed per run: the aggregate
steps/s, its ratio to the tenant alone (the baseline, measured in the same run), and the
spread of the tenants' own rates (max/min: 1.0 is perfectly fair). Then the queueing check of
the acceptance: one tenant queues 20 steps at once, another sends one step; how many of the
first one's steps finished before the second one's did (round-robin: at most 2).

The Lab runs one training request at a time, so on a CPU the aggregate stays near the alone
rate (the model is busy either way) while each tenant gets its share. The tenant alone runs
before and after the others, its mean the baseline; the load average is printed.

Sampling (`--part sample`): each tenant its own hub user with a sampling client of its own
rank-8 adapter, sending `--requests` requests one after another (4 samples of up to
`--max-tokens` tokens each, temperature 1, seeded). Three Lab hubs on the same engine, run
back to back for each tenant count: `batched` (the Lab as it is: requests waiting together
and those arriving between two tokens decode as one batch, up to 64 rows), `per request` (a
batch of 1 row's room: each request alone, its 4 rows together) and `per row` (the same, each
request sent as 4 requests of 1 sample: one row at a time, the baseline). Printed: samples/s,
tokens/s and tokens per CPU-second of this process (the Lab, its HTTP server and the SDK's
clients), and each mode's tokens per CPU-s against `per row` at the same tenant count.

With `--engine vllm` the sampling part compares engines instead: the Lab with its vLLM
sampler (`prime hub serve --lab --lab-engine vllm`: a vLLM-CPU server beside the torch engine,
started once, LoRA up to rank 8) against the torch Lab, both `batched`, back to back for each
tenant count; tokens per CPU-second count this process and, for vLLM, every process of its
server (its API server, engine core and worker), and `vs torch` is each against the torch Lab.

Then the engine alone (`--part engine`): one `sample_batch` of 4 requests of 4 rows (one
adapter, four adapters, the base model) against one request, in tokens per CPU-second.

Usage: `python scripts/bench_lab.py [--part sample|engine|train|all] [--engine torch|vllm]
[--steps 6] [--tenants 1,2,4] [--requests 3] [--max-tokens 24] [--threads N] [--quick]`.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BASE = "local/smollm2-135m"
TEXTS = ["The capital of France is Paris.", "Two plus two equals four."]


SAMPLES = 4  # per request
PROMPT = "Write a short story about a robot who learns to paint."
MODES = ("batched", "per request", "per row")
VLLM_MAX_RANK = 8  # the tenants' adapters are rank 8


@dataclass(frozen=True)
class Setup:
    """One row kind of the sampling table: a Lab engine, the rows a batch may hold, whether
    each request goes as `SAMPLES` requests of one sample, and what counts as its CPU."""

    mode: str
    engine: Any
    batch_rows: int = 64
    split: bool = False
    cpu: Callable[[], float] = time.process_time


def threads(engine: Any) -> str:
    """The engine's torch threads (its worker sets them: torch's count is per thread)."""
    return f"engine threads {engine.threads or 'by the load (cores.idle_threads)'}"


def serve(data_dir: Path, engine: Any, batch_rows: int = 64) -> tuple[str, Any, threading.Thread]:
    import socket

    import uvicorn

    from hub_server.app import create_app
    from hub_server.core.settings import HubSettings
    from hub_server.lab.service import LabLimits

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    limits = LabLimits(batch_rows=batch_rows)
    app = create_app(HubSettings.from_env(data_dir), lab=engine, lab_limits=limits)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    return f"http://127.0.0.1:{port}/lab", server, thread


def tenant_token(data_dir: Path, name: str) -> str:
    from hub_server.admin import create_token, create_user, open_database
    from hub_server.core.settings import HubSettings

    engine = open_database(HubSettings.from_env(data_dir))
    try:
        create_user(engine, name)
        return create_token(engine, name, "bench", ["train"])[0]
    finally:
        engine.dispose()


def batch(tokenizer: Any) -> list[Any]:
    import numpy as np
    from tinker import types

    data = []
    for text in TEXTS:
        ids = tokenizer.encode(text)
        data.append(
            types.Datum(
                model_input=types.ModelInput.from_ints(ids[:-1]),
                loss_fn_inputs={
                    "target_tokens": types.TensorData.from_numpy(np.array(ids[1:], np.int64)),
                    "weights": types.TensorData.from_numpy(np.ones(len(ids) - 1, np.float32)),
                },
            )
        )
    return data


def trainer_for(url: str, token: str) -> Any:
    import tinker

    client = tinker.ServiceClient(base_url=url, api_key=f"tml-{token}")
    return client.create_lora_training_client(base_model=BASE, rank=8).result()


def run_tenants(trainers: list[Any], data: list[Any], steps: int) -> tuple[float, list[float]]:
    """Each trainer does `steps` steps in a thread of its own; (wall s, each one's steps/s)."""
    from tinker import types

    rates = [0.0] * len(trainers)

    def work(index: int) -> None:
        start = time.perf_counter()
        for _ in range(steps):
            step = trainers[index].forward_backward(data, "cross_entropy")
            update = trainers[index].optim_step(types.AdamParams(learning_rate=1e-4))
            step.result()
            update.result()
        rates[index] = steps / (time.perf_counter() - start)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(trainers))]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - start, rates


def queueing(busy: Any, other: Any, data: list[Any], queued: int) -> int:
    """`busy` queues `queued` steps at once, then `other` sends one: how many of `busy`'s
    steps had finished when `other`'s did (each result awaited in a thread of its own)."""
    from tinker import types

    finished: list[float] = []
    lock = threading.Lock()

    def record(future: Any) -> None:
        future.result()
        with lock:
            finished.append(time.perf_counter())

    waiters = []
    for _ in range(queued):
        busy.forward_backward(data, "cross_entropy")
        update = busy.optim_step(types.AdamParams(learning_rate=1e-4))
        waiters.append(threading.Thread(target=record, args=(update,)))
        waiters[-1].start()
    time.sleep(0.5)  # the busy tenant's requests reach the Lab first
    other.forward_backward(data, "cross_entropy").result()
    other_done = time.perf_counter()
    for waiter in waiters:
        waiter.join()
    return sum(1 for t in finished if t <= other_done)


def samplers_for(url: str, tokens: list[str]) -> list[Any]:
    """A sampling client per tenant, each of its own rank-8 adapter (a snapshot)."""
    return [
        trainer_for(url, token).save_weights_and_get_sampling_client().result() for token in tokens
    ]


def run_samplers(
    samplers: list[Any],
    prompt: list[int],
    requests: int,
    max_tokens: int,
    split: bool,
    cpu_s: Callable[[], float] = time.process_time,
) -> tuple[float, float, int, int]:
    """Each sampler sends `requests` requests of `SAMPLES` samples one after another from a
    thread of its own (`split`: each as `SAMPLES` requests of one, sent at once); (wall s,
    CPU s by `cpu_s`, samples, tokens)."""
    from tinker import types

    counts = [(0, 0)] * len(samplers)
    model_input = types.ModelInput.from_ints(prompt)

    def work(index: int) -> None:
        samples = tokens = 0
        for r in range(requests):
            seed = 1000 * index + r
            params = [types.SamplingParams(max_tokens=max_tokens, temperature=1.0, seed=seed)]
            if split:
                params = [
                    types.SamplingParams(max_tokens=max_tokens, temperature=1.0, seed=seed * 8 + i)
                    for i in range(SAMPLES)
                ]
            n = 1 if split else SAMPLES
            pending = [samplers[index].sample(model_input, n, p) for p in params]
            for future in pending:
                for sequence in future.result().sequences:
                    samples += 1
                    tokens += len(sequence.tokens)
        counts[index] = (samples, tokens)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(samplers))]
    start, cpu = time.perf_counter(), cpu_s()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall, used = time.perf_counter() - start, cpu_s() - cpu
    return wall, used, sum(c[0] for c in counts), sum(c[1] for c in counts)


def bench_sampling(
    setups: list[Setup], root: Path, counts: list[int], requests: int, max_tokens: int
) -> None:
    """The sampling table: each tenant count, the setups back to back, each against the last
    (`per row`, or the torch Lab when engines are compared)."""
    prompt = setups[-1].engine.tokenizer.encode(PROMPT)  # the torch engine's
    hubs: dict[str, tuple[list[Any], Any, threading.Thread]] = {}
    for setup in setups:
        data_dir = root / setup.mode.replace(" ", "-")
        data_dir.mkdir()
        url, server, thread = serve(data_dir, setup.engine, setup.batch_rows)
        keys = [tenant_token(data_dir, f"sampler{i}") for i in range(max(counts))]
        hubs[setup.mode] = (samplers_for(url, keys), server, thread)
    baseline = setups[-1].mode
    try:
        for setup in setups:  # warm-up (vLLM: the adapters' first load)
            run_samplers(hubs[setup.mode][0][: max(counts)], prompt, 1, 4, False)
        print(
            f"\nsampling: {SAMPLES} samples a request, up to {max_tokens} tokens, "
            f"{requests} requests per tenant, temperature 1"
        )
        print(f"| tenants | mode | samples/s | tokens/s | tokens per CPU-s | vs {baseline} |")
        print("|---|---|---|---|---|---|")
        for count in counts:
            rows = {}
            for setup in setups:
                samplers = hubs[setup.mode][0][:count]
                wall, cpu, samples, tokens = run_samplers(
                    samplers, prompt, requests, max_tokens, setup.split, setup.cpu
                )
                rows[setup.mode] = (samples / wall, tokens / wall, tokens / cpu)
            for setup in setups:
                per_s, tok_s, per_cpu = rows[setup.mode]
                ratio = per_cpu / rows[baseline][2]
                print(
                    f"| {count} | {setup.mode} | {per_s:.2f} | {tok_s:.1f} | {per_cpu:.1f} | "
                    f"{ratio:.2f}x |"
                )
        print(f"{threads(setups[-1].engine)}, load {os.getloadavg()[0]:.2f} (1 min)")
    finally:
        for _, server, thread in hubs.values():
            server.should_exit = True
            thread.join(timeout=30)


def torch_setups(engine: Any) -> list[Setup]:
    """The torch Lab batched, with room for one request's rows, and one row at a time."""
    return [
        Setup("batched", engine),
        Setup("per request", engine, batch_rows=1),
        Setup("per row", engine, batch_rows=1, split=True),
    ]


def vllm_setups(engine: Any, root: Path) -> list[Setup]:
    """The Lab with its vLLM sampler (started here, ready before it returns) and the torch
    Lab, both batched; the vLLM Lab's CPU counts its server's processes."""
    from scripts.bench_engines import tree_cpu
    from trainer_bridge.lab.vllm_engine import start_vllm_lab

    started = time.monotonic()
    lab = start_vllm_lab(BASE, max_lora_rank=VLLM_MAX_RANK, log=root / "vllm.log")
    lab.wait_ready()
    pid = lab.server.pid
    assert pid is not None
    print(f"vLLM ready after {time.monotonic() - started:.0f} s (CPU {tree_cpu(pid):.0f} s)")
    return [
        Setup("vllm", lab, cpu=lambda: time.process_time() + tree_cpu(pid)),
        Setup("torch", engine),
    ]


def agreement(lab: Any, max_tokens: int) -> None:
    """The vLLM sampler against the torch engine, on two trained rank-8 adapters and the
    base: greedy tokens of both engines, and vLLM's logprobs of its own samples (greedy and
    at temperature 1) against the torch engine's forward of the same tokens."""
    import numpy as np

    from hub_server.lab.engine import SampleCall

    torch_engine = lab.trainer
    tokenizer = torch_engine.tokenizer
    adam = {"beta1": 0.9, "beta2": 0.95, "eps": 1e-8, "weight_decay": 0.0, "grad_clip_norm": 0.0}
    for seed, name in enumerate(("agree0", "agree1")):
        lab.create_adapter(name, VLLM_MAX_RANK, seed, True, True)
        ids = [np.array(tokenizer.encode(text), dtype=np.int64) for text in TEXTS]
        targets = [{"target_tokens": seq[1:]} for seq in ids]
        lab.forward_backward(name, [seq[:-1] for seq in ids], targets, "cross_entropy", {}, False)
        lab.optim_step(name, {"learning_rate": 5e-3, **adam})
    prompt = tokenizer.encode(PROMPT)
    params: list[dict[str, float | int | None]] = [
        {"max_tokens": max_tokens, "temperature": 0.0},
        {"max_tokens": max_tokens, "temperature": 1.0, "seed": 1},
    ]
    calls = [
        SampleCall(adapter, prompt, SAMPLES, p, [], [])
        for adapter in ("agree0", "agree1", None)
        for p in params
    ]
    served: dict[int, Any] = {}
    local: dict[int, Any] = {}
    lab.sample_batch(calls, lambda rows: [], served.__setitem__)
    torch_engine.sample_batch(calls[0::2], lambda rows: [], local.__setitem__)
    refused = [o for o in [*served.values(), *local.values()] if isinstance(o, ValueError)]
    if refused:
        raise RuntimeError(f"the agreement's requests were refused: {refused}")
    same = sum(
        [t for t, _, _ in served[2 * i]] == [t for t, _, _ in local[i]] for i in range(len(local))
    )
    gap = 0.0
    for index, call in enumerate(calls):
        for tokens, logprobs, _ in served[index]:
            forward = torch_engine.prompt_logprobs(call.adapter, prompt + tokens)[-len(tokens) :]
            gap = max(gap, float(np.abs(np.array(logprobs) - np.array(forward)).max()))
    print(
        f"\nagreement: greedy tokens equal to the torch engine's in {same}/{len(local)} "
        f"requests ({SAMPLES} rows each); vLLM's logprobs of {len(calls) * SAMPLES} samples "
        f"against the torch engine's forward: max |diff| {gap:.1e}"
    )
    for name in ("agree0", "agree1"):
        lab.delete_adapter(name)


def bench_engine(engine: Any, max_tokens: int) -> None:
    """The engine alone, in this thread: one batch of 4 requests (one adapter, four, the
    base) against one request, every row `max_tokens` long (no stop)."""
    from hub_server.lab.engine import SampleCall

    prompt = engine.tokenizer.encode(PROMPT)
    names = [f"bench{i}" for i in range(4)]
    for name in names:
        engine.create_adapter(name, 8, 0, True, True)

    def rate(adapters: list[str | None]) -> float:
        calls = [
            SampleCall(a, prompt, SAMPLES, {"max_tokens": max_tokens, "temperature": 1.0}, [-1], [])
            for a in adapters
        ]
        cpu = time.process_time()
        engine.sample_batch(calls, lambda rows: [], lambda index, outcome: None)
        return len(calls) * SAMPLES * max_tokens / (time.process_time() - cpu)

    try:
        rate(names[:1])  # warm-up
        alone = rate(names[:1])
        print(f"\nthe engine alone: one batch, {SAMPLES} rows a request, {max_tokens} tokens a row")
        print("| batch | tokens per CPU-s | vs 1 request |")
        print("|---|---|---|")
        print(f"| 1 request | {alone:.1f} | 1.00x |")
        for label, adapters in (
            ("4 requests, one adapter", names[:1] * 4),
            ("4 requests, four adapters", names),
            ("4 requests, the base", [None] * 4),
        ):
            value = rate(adapters)
            print(f"| {label} | {value:.1f} | {value / alone:.2f}x |")
        print(f"{threads(engine)}, load {os.getloadavg()[0]:.2f} (1 min)")
    finally:
        for name in names:
            engine.delete_adapter(name)


def bench_training(engine: Any, data_dir: Path, counts: list[int], steps: int, queued: int) -> None:
    """The training table and the queueing check."""
    data = batch(engine.tokenizer)
    data_dir.mkdir()
    url, server, thread = serve(data_dir, engine)
    try:
        tokens = [tenant_token(data_dir, f"tenant{i}") for i in range(max(counts))]
        trainers = [trainer_for(url, token) for token in tokens]
        run_tenants(trainers[:1], data, 1)  # warm-up: first-step allocations
        # The tenant alone before and after the others (the load drifts on a shared host):
        # the baseline is the mean of the two.
        first, _ = run_tenants(trainers[:1], data, steps)
        results = {n: run_tenants(trainers[:n], data, steps) for n in counts if n > 1}
        last, _ = run_tenants(trainers[:1], data, steps)
        alone = steps / ((first + last) / 2)
        print(f"alone: {steps / first:.2f} then {steps / last:.2f} steps/s (baseline: mean)")
        print("| tenants | steps/s (all) | vs alone | per tenant (min-max) | spread |")
        print("|---|---|---|---|---|")
        print(f"| 1 | {alone:.2f} | 1.00x | {alone:.2f} | 1.00 |")
        for count, (wall, rates) in results.items():
            total = count * steps / wall
            print(
                f"| {count} | {total:.2f} | {total / alone:.2f}x | "
                f"{min(rates):.2f}-{max(rates):.2f} | {max(rates) / min(rates):.2f} |"
            )
        if len(trainers) >= 2:
            before = queueing(trainers[0], trainers[1], data, queued)
            print(
                f"\nqueueing: tenant 0 queued {queued} steps, tenant 1 sent one; "
                f"{before} of tenant 0's steps finished before tenant 1's (round-robin: <= 2)"
            )
        print(f"{threads(engine)}, load {os.getloadavg()[0]:.2f} (1 min)")
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--part", choices=["sample", "engine", "train", "all"], default="all")
    parser.add_argument(
        "--engine",
        choices=["torch", "vllm"],
        default="torch",
        help="vllm: the sampling part compares the Lab's vLLM sampler with the torch Lab",
    )
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--tenants", default="1,2,4")
    parser.add_argument("--queued", type=int, default=20)
    parser.add_argument("--requests", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=24)
    parser.add_argument(
        "--threads", type=int, help="the engine's torch threads (default: the Lab's rule)"
    )
    parser.add_argument("--quick", action="store_true", help="CI check: 1 and 2 tenants, short")
    args = parser.parse_args()
    counts = [int(n) for n in args.tenants.split(",")]
    steps, queued, requests, max_tokens = args.steps, args.queued, args.requests, args.max_tokens
    if args.quick:
        counts, steps, queued, requests, max_tokens = [1, 2], 2, 3, 1, 4
    if args.engine == "vllm" and args.part != "sample":
        parser.error("--engine vllm compares sampling: use it with --part sample")
    os.environ.setdefault("TINKER_TELEMETRY", "0")

    from trainer_bridge.lab.engine import TorchLabEngine

    engine = TorchLabEngine(BASE, threads=args.threads)
    print(f"load {os.getloadavg()[0]:.2f} (1 min) at the start, {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory(prefix="bench-lab-") as tmp:
        if args.part in ("sample", "all"):
            setups = vllm_setups(engine, Path(tmp)) if args.engine == "vllm" else None
            bench_sampling(setups or torch_setups(engine), Path(tmp), counts, requests, max_tokens)
            if setups is not None:
                agreement(setups[0].engine, max_tokens)
        if args.part in ("engine", "all"):
            bench_engine(engine, max_tokens)
        if args.part in ("train", "all"):
            bench_training(engine, Path(tmp) / "train", counts, steps, queued)


if __name__ == "__main__":
    main()
