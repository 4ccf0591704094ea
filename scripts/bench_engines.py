"""The engines against each other on this machine (issue 34): vLLM (`prime engine install
vllm`) and the torch engine, interleaved, same prompts and sampling. Prints ratios and load.

    python scripts/bench_engines.py sample [--rounds 3] [--conditions quiet,busy]
                                           [--workloads single,wiki,multi] [--policy DIR]
                                           [--engines torch,vllm]
    python scripts/bench_engines.py policy [--out DIR] [--steps 8]
    python scripts/bench_engines.py steps  [--steps 8] [--seeds 0]
    python scripts/bench_engines.py learn  [--seeds 0,1] [--sides torch,vllm,trl] [--stop-at 0.8]
                                           [--through 8] [--give-up 16]

`sample`: tokens/s and tokens per CPU-second (every process of the engine counted: the client
and, for vLLM, its server, engine and worker processes) for three workloads: `single` (32
arithmetic prompts x 32 tokens, T=0.7, 32 in flight), `wiki` (wiki-search's recipe: 8
questions x 4 rollouts of up to 4 turns with tools, 128 tokens a turn, T=0.8, 32 in flight;
the base model calls no tool, so one turn each) and `multi` (the same rollouts sampled by a
policy that calls the tools, `--policy DIR`: a LoRA broadcast of wiki-search's SFT stage, as
`policy` makes one, served by each engine as training serves it, so several turns each),
each engine in turn within a round (the order alternating), `quiet` and with one core kept
busy by a spinning process (`busy`, as the trainer keeps one). The vLLM server is started once
(its start-up is reported on its own); the torch engine samples on one thread, as in training.
`--engines torch` measures the torch engine alone (a host without vLLM).

`policy`: the `multi` workload's policy: `prime train builtin_envs/wiki-search` through its
recipe's SFT stage (8 steps on the reference policy's traces, evals off; each step ~1-2 minutes
on two cores), its last broadcast printed.

`steps`: `prime train prime/arithmetic` with its recipe for N steps (no evals) through each
engine, interleaved: CPU-seconds of the whole run (every process, vLLM's start-up included).
Target: vLLM within 1.5x of torch.

`learn`: `prime train prime/arithmetic` with its recipe through each engine, two seeds, TRL's
GRPOTrainer beside (scripts/bench_train.py `trl`: one run at a time, interleaved), each run
stopped once it has reached held-out `correct` >= the bar and been evaluated at step
`--through`, or at `--give-up`. CPU-s (every process, vLLM's server included: `evals.jsonl`'s
`cpu_s`) and wall-s to the bar, and held-out `correct`, CPU-s and wall-s at step `--through`.
Targets: vLLM within 1.5x of torch's CPU-s for 8 steps, start-up included, and its held-out
within 0.15 of torch's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Self

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

MODEL = "local/smollm2-135m"
ARITHMETIC = ROOT / "builtin_envs" / "arithmetic"
WIKI = ROOT / "builtin_envs" / "wiki-search"
WORKLOADS: dict[str, dict[str, Any]] = {
    "single": {
        "env": str(ARITHMETIC),
        "args": {"difficulty": 1, "num_train_examples": 50, "num_eval_examples": 50},
        "n": 32, "r": 1, "max_tokens": 32, "temperature": 0.7,
    },
    "wiki": {
        "env": str(WIKI),
        "args": {"max_turns": 4, "num_eval_examples": 20, "search_results": 3, "snippet_chars": 100},
        "n": 8, "r": 4, "max_tokens": 128, "temperature": 0.8,
    },
}  # fmt: skip
WORKLOADS["multi"] = {**WORKLOADS["wiki"], "policy": True}
WIKI_SFT_STEPS = 8
"""The SFT stage of wiki-search's recipe (wiki_search/train/smollm2-135m.toml)."""


# ------------------------------------------------------------------ processes and CPU


def _stat(pid: int) -> tuple[int, float] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / ticks


def tree_cpu(root: int) -> float:
    """CPU-s of `root` and its live descendants (vLLM's engine and worker processes)."""
    parents, used = {}, {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None:
                parents[int(entry.name)], used[int(entry.name)] = stat
    total = 0.0
    for pid, seconds in used.items():
        node: int | None = pid
        while node is not None and node not in (root, 0, 1):
            node = parents.get(node)
        if node == root:
            total += seconds
    return total


class Busy:
    """One core kept busy by a spinning process (its CPU is not counted)."""

    def __enter__(self) -> Self:
        self.proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        return self

    def __exit__(self, *_: object) -> None:
        self.proc.kill()
        self.proc.wait()


class Server:
    """One vLLM server as `prime train --backend vllm` starts it (LoRA rank 16 enabled)."""

    def __init__(self, log: Path) -> None:
        from engines.install import find_vllm
        from engines.process import Child
        from engines.served_models import model_directory
        from engines.vllm_server import ServerSpec, local_url, server_argv, server_env

        spec = ServerSpec(model_directory(MODEL), MODEL, local_url(), lora_rank=16)
        self.url = spec.url
        self.child = Child("vllm", server_argv(find_vllm(), spec), log, env=server_env())
        started = time.monotonic()
        self.child.start()
        from engines.vllm_server import wait_ready

        asyncio.run(wait_ready(self.url, check=self.child.check))
        assert self.child.pid is not None
        self.pid = self.child.pid
        self.start_s = time.monotonic() - started
        self.start_cpu = tree_cpu(self.pid)

    def stop(self) -> None:
        self.child.stop(10)


# ------------------------------------------------------------------ sample


def one_sample(engine: str, workload: str, url: str | None, policy: Path | None) -> dict[str, Any]:
    """In a child process: one workload through one engine; tokens, turns and wall time."""
    from prime_env.clients.base import SamplingArgs
    from prime_env.evaluation import load_env
    from prime_env.runner import run_rollouts

    spec = WORKLOADS[workload]
    env = load_env(spec["env"], spec["args"])
    tasks = list(env.tasks)[: spec["n"]]
    sampling = SamplingArgs(max_tokens=spec["max_tokens"], temperature=spec["temperature"])

    async def go() -> tuple[list[Any], float]:
        client, close = await _serving(engine, url, policy if spec.get("policy") else None)
        started = time.monotonic()
        records = await run_rollouts(
            env, client, r=spec["r"], concurrency=32, sampling=sampling, tasks=tasks
        )
        wall = time.monotonic() - started
        await close()
        return records, wall

    records, wall = asyncio.run(go())
    scored = [r for r in records if r.error is None]
    return {
        "tokens": sum(r.usage.completion_tokens for r in records if r.usage is not None),
        "wall_s": wall,
        "turns": sum(len(r.turns or []) for r in records),
        "tool_calls": sum(r.metrics.get("tool_calls", 0.0) for r in scored),
        "reward": statistics.mean(r.reward or 0.0 for r in scored) if scored else 0.0,
        "errors": len(records) - len(scored),
    }


async def _serving(
    engine: str, url: str | None, policy: Path | None
) -> tuple[Any, Callable[[], Awaitable[None]]]:
    """A model client of `engine`'s backend as training builds it (the torch backend's LoRA
    model on one thread, on CUDA where there is one; vLLM through `VLLMBackend`), the model
    loaded (its load is not sampling), serving the base model or `policy` published to it as
    training publishes one; and how to close it."""
    from trainer_bridge.config import ModelConfig
    from trainer_bridge.protocol.policy import read_policy

    backend: Any
    if engine == "torch":
        from trainer_bridge.inference.torch_backend import TorchBackend

        backend = TorchBackend(ModelConfig(name=MODEL), threads=1)
        await backend.client().ensure_loaded()
    else:
        from local_model.models import load_tokenizer
        from trainer_bridge.inference.vllm_backend import VLLMBackend

        assert url is not None
        prefix = f"bench-{os.getpid()}-"  # adapter names never loaded before on the server
        backend = VLLMBackend(MODEL, [url], load_tokenizer(MODEL), lora_prefix=prefix)
    if policy is not None:
        await backend.publish(read_policy(policy)[0])
    return backend.client(), backend.close


def run_sample(
    engine: str, workload: str, server: Server | None, policy: Path | None
) -> dict[str, Any]:
    """One measurement in a child process: tokens/s and tokens per CPU-s of the engine's
    processes (the child's, which loads and runs the client, and the server's tree)."""
    command = [sys.executable, __file__, "_one", engine, workload]
    command += [server.url if server is not None else "-", str(policy or "-")]
    server_before = tree_cpu(server.pid) if server is not None else 0.0
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    out, _ = proc.communicate()
    if proc.returncode != 0:
        sys.exit(f"{engine} {workload} failed (exit {proc.returncode})")
    result = json.loads(out.strip().splitlines()[-1])
    client_cpu = result.pop("cpu_s")
    server_cpu = tree_cpu(server.pid) - server_before if server is not None else 0.0
    result["cpu_s"] = client_cpu + server_cpu
    result["tok_s"] = result["tokens"] / result["wall_s"]
    result["tok_cpu_s"] = result["tokens"] / result["cpu_s"]
    return result


def bench_sample(
    rounds: int,
    conditions: list[str],
    workloads: list[str],
    engines: list[str],
    policy: Path | None,
) -> None:
    if "multi" in workloads and policy is None:
        sys.exit(
            "the multi workload samples a policy that calls tools: pass --policy DIR (`policy` makes one)"
        )
    work = Path(tempfile.mkdtemp(prefix="bench-engines-"))
    load_start = os.getloadavg()[0]
    server = Server(work / "vllm.log") if "vllm" in engines else None
    if server is not None:
        print(
            f"vLLM started in {server.start_s:.0f} s, {server.start_cpu:.0f} CPU-s "
            f"(load {os.getloadavg()[0]:.1f})"
        )
    results: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    try:
        for round_ in range(rounds):
            for condition in conditions:
                for workload in workloads:
                    for engine in engines if round_ % 2 == 0 else engines[::-1]:
                        with Busy() if condition == "busy" else contextlib.nullcontext():
                            result = run_sample(
                                engine, workload, server if engine == "vllm" else None, policy
                            )
                        results.setdefault((condition, workload, engine), []).append(result)
                        print(
                            f"round {round_} {condition:5} {workload:6} {engine:5}: "
                            f"{result['tok_s']:6.1f} tok/s, {result['tok_cpu_s']:6.1f} tok/CPU-s "
                            f"({result['tokens']} tokens, {result['turns']} turns, "
                            f"{result['tool_calls']:.0f} tool calls, reward "
                            f"{result['reward']:.2f}, {result['errors']} errors; "
                            f"load {os.getloadavg()[0]:.1f})",
                            flush=True,
                        )
    finally:
        if server is not None:
            server.stop()
    print(f"\n{rounds} rounds, interleaved; load {load_start:.1f} at the start, "
          f"{os.getloadavg()[0]:.1f} at the end, on {os.cpu_count()} cores")  # fmt: skip
    for condition in conditions:
        for workload in workloads:
            rows = {e: results[(condition, workload, e)] for e in engines}
            line = " | ".join(
                f"{e} {statistics.median(r['tok_s'] for r in rs):.1f} tok/s "
                f"{statistics.median(r['tok_cpu_s'] for r in rs):.1f} tok/CPU-s"
                for e, rs in rows.items()
            )
            if {"torch", "vllm"} <= rows.keys():
                pairs = list(zip(rows["torch"], rows["vllm"]))
                ratios = [v["tok_s"] / t["tok_s"] for t, v in pairs]
                cpu_ratios = [v["tok_cpu_s"] / t["tok_cpu_s"] for t, v in pairs]
                line += (
                    f" | vLLM/torch tok/s {min(ratios):.2f}-{max(ratios):.2f}, tok/CPU-s "
                    f"{min(cpu_ratios):.2f}-{max(cpu_ratios):.2f}"
                )
            print(f"{condition:5} {workload:6}: {line}")


def make_policy(out: Path, steps: int) -> Path:
    """wiki-search's recipe through its SFT stage (evals off): the `multi` workload's policy,
    a policy that calls the tools (the base model calls none); its last broadcast."""
    from bench_train import finish_ours, start_ours

    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    proc = start_ours(
        [
            str(WIKI), "--backend", "torch", "--max-steps", str(steps), "-o", str(out),
            "--orchestrator.eval.at-start", "false", "--orchestrator.eval.at-end", "false",
            "--orchestrator.eval.interval", "0",
        ],
        out / "policy.log",
    )  # fmt: skip
    run = finish_ours("wiki-search SFT", proc, out / "policy.log", started)
    policy = run.directory / "broadcasts" / f"step_{steps}"
    print(f"{run.name}: {run.cpu_s:.0f} CPU-s, {run.wall_s:.0f} s wall; the policy: {policy}")
    return policy


# ------------------------------------------------------------------ steps and learn


def bench_steps(steps: int, seeds: list[int]) -> None:
    """CPU-s of N recipe steps (evals off) per engine, vLLM's start included, interleaved:
    wait4's for `prime train`, which reaps every process of its vLLM server's tree
    (engines.process.Child.stop)."""
    from bench_train import Load, finish_ours, start_ours

    work = Path(tempfile.mkdtemp(prefix="bench-engines-steps-"))
    load = Load()
    runs: dict[str, list[Any]] = {}
    for seed in seeds:
        for engine in ("torch", "vllm") if seed % 2 == 0 else ("vllm", "torch"):
            started = time.monotonic()
            proc = start_ours(
                [
                    str(ARITHMETIC), "--backend", engine, "--max-steps", str(steps),
                    "-o", str(work / "out"), "--seed", str(seed),
                    "--orchestrator.eval.at-start", "false", "--orchestrator.eval.at-end", "false",
                    "--orchestrator.eval.interval", "0",
                ],
                work / f"{engine}-{seed}.log",
            )  # fmt: skip
            run = finish_ours(f"{engine} seed {seed}", proc, work / f"{engine}-{seed}.log", started)
            runs.setdefault(engine, []).append(run)
            print(f"{run.name}: {run.cpu_s:.0f} CPU-s, {run.wall_s:.0f} s wall; {load.now()}")
    torch_cpu = statistics.mean(r.cpu_s for r in runs["torch"])
    vllm_cpu = statistics.mean(r.cpu_s for r in runs["vllm"])
    ratio = vllm_cpu / torch_cpu
    print(
        f"{steps} steps of the arithmetic recipe: vLLM {vllm_cpu:.0f} CPU-s, torch "
        f"{torch_cpu:.0f} CPU-s: {ratio:.2f}x (target <= 1.5x: {'met' if ratio <= 1.5 else 'missed'})"
    )
    print(load.stop())


def bench_learn(
    out: Path,
    seeds: list[int],
    sides: list[str],
    stop_at: float,
    through: int,
    give_up: int,
    threads: int,
) -> None:
    """The recipe to the held-out bar per engine and seed, TRL beside (bench_train's `trl`,
    interleaved; its virtualenv kept in OUT); then each engine at step `through` and at the
    bar, vLLM against torch."""
    from bench_train import bench_trl

    runs = bench_trl(out, seeds, threads, sides, stop_at, through=through, give_up=give_up)
    engines = [side for side in ("torch", "vllm", "trl") if side in sides]
    summary: dict[str, dict[str, float]] = {}
    for side in engines:
        mine = [r for r in runs if r.name.split()[0].lower() == side]
        at = [(r.name, r.at_step(through)) for r in mine]
        for name, found in at:
            if found is None:
                print(f"{name}: no eval at step {through}")
        held = [f for _, f in at if f is not None]
        to_bar = [r.cpu_to(stop_at) for r in mine]
        walls_to_bar = [r.wall_to(stop_at) for r in mine]
        print(
            f"{side}: at step {through}: held-out "
            + ", ".join(f"{c:.2f}" for c, _, _ in held)
            + "; CPU-s "
            + ", ".join(f"{cpu:.0f}" for _, cpu, _ in held)
            + "; wall-s "
            + ", ".join(f"{w:.0f}" if w is not None else "?" for _, _, w in held)
            + f" | to >= {stop_at}: CPU-s "
            + ", ".join(f"{c:.0f}" if c is not None else "never" for c in to_bar)
            + ", wall-s "
            + ", ".join(f"{w:.0f}" if w is not None else "never" for w in walls_to_bar)
        )
        if held:
            summary[side] = {
                "correct": statistics.mean(c for c, _, _ in held),
                "cpu_s": statistics.mean(cpu for _, cpu, _ in held),
            }
    if {"torch", "vllm"} <= summary.keys():
        torch_, vllm = summary["torch"], summary["vllm"]
        ratio = vllm["cpu_s"] / torch_["cpu_s"]
        gap = abs(vllm["correct"] - torch_["correct"])
        print(
            f"{through} steps (mean over seeds): vLLM {vllm['cpu_s']:.0f} CPU-s, torch "
            f"{torch_['cpu_s']:.0f}: {ratio:.2f}x (target <= 1.5x: "
            f"{'met' if ratio <= 1.5 else 'missed'}); held-out vLLM {vllm['correct']:.2f}, "
            f"torch {torch_['correct']:.2f}: gap {gap:.2f} (target <= 0.15: "
            f"{'met' if gap <= 0.15 else 'missed'})"
        )


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_one":
        engine, workload, url, policy = sys.argv[2:6]
        result = one_sample(
            engine, workload, None if url == "-" else url, None if policy == "-" else Path(policy)
        )
        usage = os.times()
        result["cpu_s"] = usage.user + usage.system
        print(json.dumps(result))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    sample = sub.add_parser("sample")
    sample.add_argument("--rounds", type=int, default=3)
    sample.add_argument("--conditions", default="quiet,busy")
    sample.add_argument("--workloads", default="single,wiki")
    sample.add_argument("--engines", default="torch,vllm")
    sample.add_argument("--policy", type=Path, help="the multi workload's policy (a broadcast)")
    make = sub.add_parser("policy")
    make.add_argument("--out", type=Path, default=Path("outputs/bench-engines/wiki-sft"))
    make.add_argument("--steps", type=int, default=WIKI_SFT_STEPS)
    steps = sub.add_parser("steps")
    steps.add_argument("--steps", type=int, default=8)
    steps.add_argument("--seeds", default="0")
    learn = sub.add_parser("learn")
    learn.add_argument("--seeds", default="0,1")
    learn.add_argument("--sides", default="torch,vllm,trl")
    learn.add_argument("--stop-at", type=float, default=0.8)
    learn.add_argument("--through", type=int, default=8, help="keep a run to its eval here")
    learn.add_argument("--give-up", type=int, default=16, help="stop a run here, bar or not")
    learn.add_argument("--trl-threads", type=int, default=1)
    learn.add_argument("--out", type=Path, default=Path("outputs/bench-engines"))
    args = parser.parse_args()
    if args.what == "sample":
        policy_dir = args.policy.resolve() if args.policy is not None else None
        bench_sample(
            args.rounds,
            args.conditions.split(","),
            args.workloads.split(","),
            args.engines.split(","),
            policy_dir,
        )
    elif args.what == "policy":
        make_policy(args.out.resolve(), args.steps)
    elif args.what == "steps":
        bench_steps(args.steps, [int(s) for s in args.seeds.split(",")])
    else:
        seeds = [int(s) for s in args.seeds.split(",")]
        bench_learn(
            args.out.resolve(),
            seeds,
            args.sides.split(","),
            args.stop_at,
            args.through,
            args.give_up,
            args.trl_threads,
        )


if __name__ == "__main__":
    main()
