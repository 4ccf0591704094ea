"""The trainer process on the tiny SmolLM2-shaped model: batches in, policies and
checkpoints out; step 0 agrees with the sampler; resume continues exactly."""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import tomli_w
import torch
from safetensors.torch import load_file

from prime_env.clients.base import SamplingArgs
from scripts.gpu_check_train import as_samples
from trainer_bridge.config import ModelConfig
from trainer_bridge.inference.torch_backend import TorchBackend
from trainer_bridge.protocol.batches import TrainSample, write_batch
from trainer_bridge.protocol.policy import read_policy
from trainer_bridge.protocol.run_dir import TRAINER_METRICS as METRICS_FILE
from trainer_bridge.trainer.micro_batches import micro_batches
from trainer_bridge.trainer.trainer import Trainer, load_run_config

PROMPTS = ["Count to three.", "Name a colour.", "Say hi.", "What is 2+2?"]


def make_run(
    root: Path,
    model_dir: Path,
    max_steps: int,
    *,
    lora: bool = True,
    scheduler: str = "constant",
    **ckpt: int,
) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "config").mkdir(exist_ok=True)
    config = {
        "max_steps": max_steps,
        # TOML has no null: full fine-tuning is `lora = false`
        "model": {"name": str(model_dir), "lora": {"rank": 4, "alpha": 8} if lora else False},
        "trainer": {
            "micro_batch_tokens": 128,
            "optim": {"lr": 1e-2},
            "scheduler": {"type": scheduler},
            "loss": {"kl_coef": 0.1 if lora else 0.0},
        },
        "ckpt": ckpt,
        "orchestrator": {"batch_size": 8},  # the orchestrator's: validated with the rest
    }
    (root / "config" / "resolved.toml").write_text(tomli_w.dumps(config))
    return root


@pytest.fixture(scope="module")
def sampled(tiny_model_dir: Path) -> list[TrainSample]:
    """Four real samples from the torch backend at T = 0.8 (ids and logprobs as sampled)."""

    async def sample() -> list[TrainSample]:
        backend = TorchBackend(ModelConfig(name=str(tiny_model_dir), lora=None))
        client = backend.client()
        sampling = SamplingArgs(max_tokens=10, temperature=0.8, seed=5)
        replies = await asyncio.gather(
            *(client.chat([{"role": "user", "content": p}], sampling=sampling) for p in PROMPTS)
        )
        await backend.close()
        return as_samples(list(replies), 0.8)

    return asyncio.run(sample())


def adapter(run: Path, version: int) -> dict[str, torch.Tensor]:
    return load_file(str(run / "broadcasts" / f"step_{version}" / "adapter_model.safetensors"))


def test_micro_batches_respect_the_token_budget(sampled: list[TrainSample]) -> None:
    groups = micro_batches(sampled * 3, 64)
    assert sorted(len(s.input_ids) for g in groups for s in g.samples) == sorted(
        len(s.input_ids) for s in sampled * 3
    )
    for group in groups:
        rows = group.samples
        assert group.prefix_len == 0
        assert len(rows) == 1 or len(rows) * max(len(s.input_ids) for s in rows) <= 64


def group_of(sample: TrainSample, completions: list[list[int]], key: str) -> list[TrainSample]:
    """Rollouts of one prompt: the sample's prompt with other sampled continuations."""
    n = sample.loss_mask.index(1)
    return [
        sample.model_copy(
            update={
                "input_ids": sample.input_ids[:n] + c,
                "loss_mask": [0] * n + [1] * len(c),
                "sampler_logprobs": [0.0] * n + [-2.0] * len(c),
                "advantage": 0.5 - i % 2,
                "group": key,
            }
        )
        for i, c in enumerate(completions)
    ]


def _loss_and_grads(
    batch: list[TrainSample], tiny_model_dir: Path, tmp_path: Path, share: bool
) -> tuple[float, dict[str, torch.Tensor]]:
    """One backward pass over `batch` with prompt sharing on or off, from the same
    trained-looking adapter (so a shared prompt's KV depends on it): the loss and the grads."""
    run = make_run(tmp_path / str(share), tiny_model_dir, 1)
    config = load_run_config(run)
    config.trainer.activation_checkpointing = False
    config.trainer.share_prefix = share
    trainer = Trainer(run, config)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, param in trainer.model.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.05)
    result = trainer.backward(batch)
    grads = {n: p.grad.clone() for n, p in trainer.model.named_parameters() if p.grad is not None}
    return result.loss, grads


def _same_loss_and_grads(batch: list[TrainSample], tiny_model_dir: Path, tmp_path: Path) -> None:
    """Sharing on and off: the same loss (1e-5 relative) and LoRA gradients (1e-4 relative)."""
    loss_a, a = _loss_and_grads(batch, tiny_model_dir, tmp_path, share=False)
    loss_b, b = _loss_and_grads(batch, tiny_model_dir, tmp_path, share=True)
    assert loss_b == pytest.approx(loss_a, rel=1e-5)
    assert a.keys() == b.keys() and len(a) > 0
    for name in a:
        scale = float(a[name].norm())
        assert float((a[name] - b[name]).norm()) <= 1e-4 * max(scale, 1e-12), name


def test_a_groups_shared_prompt_runs_once_and_gives_the_same_gradient(
    tiny_model_dir: Path, tmp_path: Path, sampled: list[TrainSample]
) -> None:
    """The prompt once, each rollout's remainder on its KV cache: the loss and every LoRA
    gradient as with every sequence run in full (fp32: within 1e-4 relative, as below; the
    loss within 1e-5)."""
    completions = [[17, 3000, 2], [4, 5, 6, 7, 2], [900, 2], [11, 12, 13, 14, 15, 16, 2]]
    batch = group_of(sampled[0], completions, "g0") + group_of(sampled[1], completions[:2], "g1")
    assert [m.prefix_len > 0 for m in micro_batches(batch, 4096, share_prefix=True)] == [True, True]
    assert [m.prefix_len > 0 for m in micro_batches(batch, 4096, share_prefix=False)] == [False]
    _same_loss_and_grads(batch, tiny_model_dir, tmp_path)


def test_traces_of_different_groups_share_their_common_prompt_head(
    tiny_model_dir: Path, tmp_path: Path, sampled: list[TrainSample]
) -> None:
    """One sample per group (sft traces) with the same first prompt tokens (a system prompt):
    that head runs once for all of them, with the same loss and LoRA gradients (fp32: within
    1e-4 relative; layer 0's lora_A gradients are ~1e-5 here and differ by ~1e-5 of that)."""
    head = sampled[0].input_ids[:12]
    batch = [
        sampled[0].model_copy(
            update={
                "input_ids": head + tail + completion,
                "loss_mask": [0] * (12 + len(tail)) + [1] * len(completion),
                "sampler_logprobs": [0.0] * (12 + len(tail)) + [-2.0] * len(completion),
                "advantage": 0.5 - i % 2,
                "group": f"g{i}",
            }
        )
        for i, (tail, completion) in enumerate(
            [([5, 6], [17, 3000, 2]), ([7], [4, 5, 6, 7, 2]), ([8, 9, 10], [900, 2])]
        )
    ]
    assert [m.prefix_len for m in micro_batches(batch, 4096, share_prefix=True)] == [12]
    assert [m.prefix_len for m in micro_batches(batch[:1], 4096, share_prefix=True)] == [0]
    _same_loss_and_grads(batch, tiny_model_dir, tmp_path)


def test_one_lora_step_scores_what_the_sampler_sampled_and_publishes_policy_1(
    tiny_model_dir: Path, tmp_path: Path, sampled: list[TrainSample]
) -> None:
    """One trainer step in process (tests/test_dependency_floors.py runs it at the declared
    floors, where a GPU image's transformers once died at step 0): step 0 scores the sampler's
    tokens as the sampler did, and the step's adapter is broadcast as policy 1."""
    run = make_run(tmp_path / "one", tiny_model_dir, 1)
    write_batch(run, 0, sampled)
    Trainer(run, load_run_config(run)).run()
    (metric,) = [json.loads(line) for line in (run / METRICS_FILE).read_text().splitlines()]
    assert metric["mismatch_kl"] <= 1e-6 and metric["grad_norm"] > 0
    ref, probe = read_policy(run / "broadcasts" / "step_1")
    assert ref.version == 1 and ref.kind == "lora" and len(probe.logprobs) > 10
    assert any(v.abs().sum() for k, v in adapter(run, 1).items() if "lora_B" in k)


@pytest.mark.slow  # three trainer runs: about a minute on two busy cores
def test_trains_publishes_checkpoints_and_resumes_exactly(
    tiny_model_dir: Path, tmp_path: Path, sampled: list[TrainSample]
) -> None:
    straight = make_run(tmp_path / "straight", tiny_model_dir, 3, interval=1, keep_last=2)
    for step in range(3):
        write_batch(straight, step, sampled)
    Trainer(straight, load_run_config(straight)).run()

    metrics = [json.loads(line) for line in (straight / METRICS_FILE).read_text().splitlines()]
    assert [m["step"] for m in metrics] == [0, 1, 2]
    # step 0: the trainer scores exactly what the sampler sampled (same weights, same T)
    assert metrics[0]["mismatch_kl"] <= 1e-6 and metrics[0]["ref_kl"] <= 1e-9
    assert metrics[1]["mismatch_kl"] > metrics[0]["mismatch_kl"]  # now off-policy by one step
    assert all(m["grad_norm"] > 0 and m["loss_tokens"] > 0 for m in metrics)
    for version in range(4):
        ref, probe = read_policy(straight / "broadcasts" / f"step_{version}")
        assert ref.version == version and ref.kind == "lora" and len(probe.logprobs) > 10
    assert not any(v.abs().sum() for k, v in adapter(straight, 0).items() if "lora_B" in k)
    assert adapter(straight, 1).keys() == adapter(straight, 0).keys()
    ckpts = sorted(p.name for p in (straight / "checkpoints").iterdir())
    assert ckpts == ["step_2", "step_3"]  # keep_last = 2

    # Interrupted after 2 steps, then resumed from the step-2 checkpoint: the same policy 3.
    resumed = make_run(tmp_path / "resumed", tiny_model_dir, 2, interval=2)
    for step in range(3):
        write_batch(resumed, step, sampled)
    Trainer(resumed, load_run_config(resumed)).run()
    assert not (resumed / "broadcasts" / "step_3").exists()
    make_run(resumed, tiny_model_dir, 3, interval=2)
    Trainer(resumed, load_run_config(resumed)).run()
    lines = (resumed / METRICS_FILE).read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == [0, 1, 2]
    a, b = adapter(straight, 3), adapter(resumed, 3)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_finished_cosine_stretched_by_a_resume_trains_its_added_steps(
    tiny_model_dir: Path, tmp_path: Path, sampled: list[TrainSample]
) -> None:
    """A 2-step cosine ends at lr 0; resumed to 4 steps (`--schedule extend`) the added steps
    train at the stretched cosine's lr, as a 4-step run would, not at the checkpoint's 0."""
    run = make_run(tmp_path / "run", tiny_model_dir, 2, scheduler="cosine", interval=2)
    for step in range(4):
        write_batch(run, step, sampled)
    Trainer(run, load_run_config(run)).run()
    make_run(run, tiny_model_dir, 4, scheduler="cosine", interval=2)
    Trainer(run, load_run_config(run)).run()
    lrs = [json.loads(line)["lr"] for line in (run / METRICS_FILE).read_text().splitlines()]
    # cosine over 2 steps: 1e-2, 5e-3; stretched over 4 from step 2: 5e-3, 1.46e-3
    assert lrs[:2] == pytest.approx([1e-2, 5e-3])
    assert lrs[2:] == pytest.approx([5e-3, 1e-2 * 0.5 * (1 + math.cos(math.pi * 3 / 4))])


def test_bad_run_dir_exits_2_with_a_message(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "trainer_bridge.trainer", "--run-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 2 and "resolved.toml" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.slow  # a training run and a backend load: about a minute on busy cores
async def test_full_fine_tuning_broadcasts_load_into_the_backend(
    tiny_model_dir: Path, tmp_path: Path, sampled: list[TrainSample]
) -> None:
    run = make_run(tmp_path / "full", tiny_model_dir, 1, lora=False)
    config = load_run_config(run)
    assert config.model.lora is None
    write_batch(run, 0, sampled)
    Trainer(run, config).run()
    ref, probe = read_policy(run / "broadcasts" / "step_1")
    assert ref.kind == "full"
    backend = TorchBackend(config.model)
    await backend.publish(ref)
    served = await backend.score(1, probe.token_ids)
    assert max(abs(a - b) for a, b in zip(served, probe.logprobs)) <= 1e-5
    await backend.close()
