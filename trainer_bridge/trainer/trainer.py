"""The trainer process: `python -m trainer_bridge.trainer --run-dir DIR` (or under torchrun).

It reads `DIR/config/resolved.toml`, then for each step N: waits for `batches/step_N/STABLE`,
takes one AdamW step on it in token-budget micro-batches, and publishes policy N+1 as
`broadcasts/step_{N+1}/` (adapter + policy.json with the probe, STABLE last). Every
`ckpt.interval` steps it saves weights, optimizer, scheduler and RNG under
`checkpoints/step_N/trainer/` (STABLE last, `keep_last` kept) and on start resumes from the
newest stable one. It knows nothing about environments: the batch files are its whole input.

Under torchrun (WORLD_SIZE > 1) every decoder layer is `fully_shard`ed (FSDP2; gloo on CPU);
each rank trains on its share of the batch with the global normalisers (see trainer/loss.py).
"""

from __future__ import annotations

import json
import os
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from trainer_bridge.checkpoints import trainer_state
from trainer_bridge.config import (
    ConfigError,
    Stage,
    TrainConfig,
    TrainerConfig,
    check_compatible,
    stage_at,
)
from trainer_bridge.config_loader import load_resolved
from trainer_bridge.cores import idle_threads
from trainer_bridge.protocol.batches import TrainSample, read_batch, wait_for_batch
from trainer_bridge.protocol.policy import Probe, probe_token_ids, write_policy
from trainer_bridge.protocol.run_dir import RunDir
from trainer_bridge.protocol.stable import is_stable
from trainer_bridge.trainer.distributed import (
    Dist,
    max_over_ranks,
    publish_sharded,
    shard_model,
    sum_over_ranks,
)
from trainer_bridge.trainer.loss import LossStats, Normaliser, resolve_loss
from trainer_bridge.trainer.loss_parts import composed_loss, token_streams
from trainer_bridge.trainer.micro_batches import (
    MicroBatch,
    effective_mask,
    micro_batches,
    normaliser,
)
from trainer_bridge.trainer.modeling import (
    TokenScorer,
    add_lora,
    load_base,
    resolve_device,
    right_pad,
)
from trainer_bridge.trainer.schedule import lr_schedule
from trainer_bridge.usage import peak_rss_mb


def load_run_config(run_dir: Path) -> TrainConfig:
    """The run's resolved config, as the orchestrator wrote it (the trainer reads `model`,
    `trainer`, `max_steps`, `ckpt` and the stages' trainer settings)."""
    config = load_resolved(RunDir(run_dir).resolved_config)
    check_compatible(config.model, config.trainer)
    return config


@dataclass
class Accumulated:
    """A batch's gradient is in `.grad`; these are its statistics over all ranks."""

    stats: LossStats
    loss: float
    samples: float
    micro_batches: int


def enable_checkpointing(model: Any) -> None:
    """Activation checkpointing per decoder layer (non-reentrant, which LoRA's frozen inputs
    need). transformers 5 renamed the call (`gradient_checkpointing_enable` warns that it is
    deprecated); releases before the rename only have the old name."""
    kwargs = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


class Trainer:
    def __init__(self, run_dir: Path, config: TrainConfig, dist: Dist | None = None) -> None:
        self.run_dir = run_dir
        self.paths = RunDir(run_dir)
        self.config = config
        self.dist = dist or Dist()
        if config.trainer.world_size != self.dist.world_size:
            raise ConfigError(
                f"trainer.world_size is {config.trainer.world_size} but {self.dist.world_size} "
                "trainer process(es) run: start it with torchrun --nproc-per-node "
                f"{config.trainer.world_size} (prime train does)"
            )
        tc = config.trainer
        self.device = resolve_device(config.model)
        if self.device.type == "cpu":
            torch.set_num_threads(tc.threads)
        if config.deterministic:
            deterministic_torch()
        torch.manual_seed(tc.seed)
        random.seed(tc.seed)
        base, self.tokenizer = load_base(config.model)
        if tc.activation_checkpointing:
            enable_checkpointing(base)
        self.model = add_lora(base, config.model)
        self.scorer = TokenScorer(self.model, tc.logprob_chunk)
        if self.dist.world_size > 1:
            shard_model(self.scorer)
        self.plan = config.stage_plan()
        self.stage = self.plan[0]
        self._enter(self.stage)
        self.pad_id = int(self.tokenizer.pad_token_id or self.tokenizer.eos_token_id or 0)
        self.probe_ids = probe_token_ids(self.tokenizer)

    @property
    def tc(self) -> TrainerConfig:
        """The trainer settings of the current stage (loss, optimiser, schedule)."""
        return self.stage.config.trainer

    def _enter(self, stage: Stage) -> None:
        """A fresh AdamW and schedule (over the stage's steps) and the stage's loss."""
        self.stage = stage
        tc = stage.config.trainer
        params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(
            params,
            lr=tc.optim.lr,
            betas=(tc.optim.betas1, tc.optim.betas2),
            weight_decay=tc.optim.weight_decay,
        )
        self.scheduler = lr_schedule(self.optimizer, tc, stage.steps)
        self.loss_fn = resolve_loss(tc.loss)

    # --- one step -----------------------------------------------------------------------
    def train_step(self, samples: list[TrainSample]) -> dict[str, float]:
        """One optimizer step on a whole batch; returns the step's metrics."""
        started, cpu_started = time.perf_counter(), time.process_time()
        lr = float(self.scheduler.get_last_lr()[0])
        if not samples:  # every group had zero advantage: the step makes no update
            self.scheduler.step()
            return {"lr": lr, "skipped": 1.0, "samples": 0.0, "loss_tokens": 0.0}
        accumulated = self.backward(samples)
        params = [p for p in self.model.parameters() if p.requires_grad]
        max_norm = self.tc.optim.max_norm
        total_norm = torch.nn.utils.clip_grad_norm_(params, max_norm or float("inf"))
        if hasattr(total_norm, "full_tensor"):  # a DTensor under FSDP
            total_norm = total_norm.full_tensor()
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        stats = accumulated.stats
        tokens = max(stats.tokens, 1.0)
        return {
            "loss": accumulated.loss,
            "lr": lr,
            "grad_norm": float(total_norm),
            "entropy": stats.entropy / tokens,
            "mismatch_kl": stats.mismatch_kl / tokens,
            "clip_fraction": stats.clipped / tokens,
            "ref_kl": stats.ref_kl / tokens,
            "loss_tokens": stats.tokens,
            "ce_loss": stats.ce_nll / max(stats.ce_tokens, 1.0),
            "ce_tokens": stats.ce_tokens,
            "samples": accumulated.samples,
            "micro_batches": float(accumulated.micro_batches),
            "train_s": time.perf_counter() - started,
            "train_cpu_s": time.process_time() - cpu_started,
        }

    def backward(self, samples: list[TrainSample]) -> Accumulated:
        """Accumulate the whole batch's gradient (this rank's share of it) in `.grad`."""
        norm = normaliser(samples, self.tc, self.dist.world_size)
        mine = samples[self.dist.rank :: self.dist.world_size]
        run = self.config.trainer
        share = run.share_prefix and not run.activation_checkpointing and self.dist.world_size == 1
        groups = micro_batches(mine, run.micro_batch_tokens, share_prefix=share)
        rounds = len(groups)
        if self.dist.world_size > 1:
            rounds = max_over_ranks(rounds)
        self.model.train()
        stats = LossStats()
        total_loss = 0.0
        filler = MicroBatch((groups[-1].samples if groups else samples)[:1])
        for i in range(rounds):  # the filler keeps FSDP's collectives in step
            self._share_cores()
            group = groups[i] if i < len(groups) else filler
            loss, part = self._micro_step(group, norm, dummy=i >= len(groups))
            total_loss += loss
            stats.add(part)
        samples_seen = float(len(mine))
        if self.dist.world_size > 1:
            stats, total_loss, samples_seen = sum_over_ranks(stats, total_loss, samples_seen)
        return Accumulated(stats, total_loss, samples_seen, len(groups))

    def _share_cores(self) -> None:
        """On CPU, take the sampler's core while it waits for the policy being trained
        (progress.json says so) and the machine has room (cores.idle_threads), give it back once
        it samples again. Not with --deterministic:
        the thread count changes the order of float sums."""
        if self.device.type != "cpu" or self.config.deterministic:
            return
        tc = self.config.trainer
        waiting = sampler_waiting(self.paths)
        threads = idle_threads(tc.idle_sampler_threads, tc.threads) if waiting else tc.threads
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)

    def _micro_step(
        self, micro: MicroBatch, norm: Normaliser, *, dummy: bool
    ) -> tuple[float, LossStats]:
        tc = self.tc
        group = micro.samples
        padded = right_pad([s.input_ids for s in group], self.pad_id, self.device)
        width = padded.input_ids.shape[1]

        def rows(values: list[list[Any]], dtype: torch.dtype) -> torch.Tensor:
            out = torch.zeros((len(group), width), dtype=dtype)
            for r, v in enumerate(values):
                out[r, : len(v)] = torch.tensor(v, dtype=dtype)
            return out.to(self.device)

        masks = [effective_mask(s, tc.loss.mask_truncated) for s in group]
        if dummy:
            masks = [[0] * len(m) for m in masks]
        streams = token_streams(group, masks, rows)
        temperature = torch.tensor([s.temperature for s in group], device=self.device)
        # The LM head runs on trained positions only. With none (a filler micro-batch, or all
        # masked out) it runs on all, so the loss still has a graph (0, with FSDP's hooks).
        positions = rows(masks, torch.bool)
        trained = None if not bool(positions.any()) else positions
        ref = None
        if tc.loss.kl_coef > 0:
            with torch.no_grad(), self.model.disable_adapter():
                ref, _ = self.scorer(
                    padded.input_ids,
                    padded.attention_mask,
                    temperature,
                    only=trained,
                    prefix_len=micro.prefix_len,
                )
        logprobs, entropy = self.scorer(
            padded.input_ids,
            padded.attention_mask,
            temperature,
            with_entropy=True,
            only=trained,
            prefix_len=micro.prefix_len,
        )
        loss, stats = composed_loss(
            self.loss_fn,
            tc.loss,
            norm,
            streams,
            logprobs=logprobs,
            sampler_logprobs=rows([s.sampler_logprobs for s in group], torch.float32),
            ref_logprobs=ref,
            entropy=entropy if tc.loss.entropy_coef > 0 else entropy.detach(),
        )
        loss.backward()
        return float(loss.detach()), stats

    # --- policies -----------------------------------------------------------------------
    def probe(self) -> Probe:
        self.model.eval()
        with torch.no_grad():
            padded = right_pad([self.probe_ids], self.pad_id, self.device)
            logprobs, _ = self.scorer(padded.input_ids, padded.attention_mask)
        return Probe(self.probe_ids, [float(x) for x in logprobs[0, 1 : len(self.probe_ids)]])

    def publish(self, version: int) -> None:
        probe = self.probe()  # every rank runs the forward (FSDP gathers), rank 0 writes
        if self.dist.world_size > 1:
            publish_sharded(self.model, self.paths, version, probe, main=self.dist.main)
        elif not is_stable(self.paths.broadcast(version)):
            write_policy(self.run_dir, version, self.model, probe)

    # --- checkpoints (checkpoints/trainer_state.py) -------------------------------------
    def save_checkpoint(self, step: int) -> None:
        state = trainer_state.TrainerState(
            self.model, self.optimizer, self.scheduler, self.stage.index
        )
        sharded = self.dist.world_size > 1
        trainer_state.save(self.paths, step, state, sharded=sharded, main=self.dist.main)
        keep = self.config.ckpt.keep_last
        if keep and self.dist.main:
            trainer_state.prune(self.paths, keep)

    def load_checkpoint(self, step: int) -> None:
        """Restore the weights of step `step`; the optimizer and schedule too when they belong
        to the stage `step` is in (at a stage's first step the new stage starts afresh)."""
        state = trainer_state.TrainerState(
            self.model, self.optimizer, self.scheduler, self.stage.index
        )
        trainer_state.load(self.paths, step, state, sharded=self.dist.world_size > 1)

    def _align_lr(self) -> None:
        """Set the lr to what this config's schedule gives at the restored step. A checkpoint
        keeps the lr it ended on; a resume that stretched the schedule (`prime train resume
        --max-steps N --schedule extend`) trains on the stretched one from its first step, not
        at the old schedule's last lr (0 at the end of a cosine)."""
        sched = self.scheduler
        lrs = [base * fn(sched.last_epoch) for base, fn in zip(sched.base_lrs, sched.lr_lambdas)]
        for group, lr in zip(self.optimizer.param_groups, lrs):
            group["lr"] = lr
        sched._last_lr = lrs

    # --- the loop -----------------------------------------------------------------------
    def resume_step(self, requested: int | None) -> int:
        stable = trainer_state.stable_steps(self.paths)
        if requested is not None:
            if requested and requested not in stable:
                raise SystemExit(f"no stable trainer checkpoint at step {requested}: {stable}")
            return requested
        return stable[-1] if stable else 0

    def run(self, resume_step: int | None = None) -> None:
        start = self.resume_step(resume_step)
        self._enter(stage_at(self.plan, start))
        if start:
            self.load_checkpoint(start)
            self._align_lr()
        self.publish(start)
        if self.dist.main:
            self.paths.trim_trainer_metrics(start)
        interval = self.config.ckpt.interval
        for step in range(start, self.config.max_steps):
            stage = stage_at(self.plan, step)
            if stage.index != self.stage.index:
                self._enter(stage)
            waited = wait_for_batch(self.run_dir, step)
            batch = read_batch(self.run_dir, step)
            metrics = self.train_step(batch.samples)
            self.publish(step + 1)
            done = step + 1
            if (interval and done % interval == 0) or done == self.config.max_steps:
                self.save_checkpoint(done)
            if self.dist.main:
                metrics.update(
                    step=step, stage=self.stage.index, wait_s=waited, peak_rss_mb=peak_rss_mb()
                )
                with self.paths.trainer_metrics.open("a") as out:
                    out.write(json.dumps(metrics) + "\n")


def sampler_waiting(paths: RunDir) -> bool:
    """Whether the orchestrator's sampler is idle, waiting for a policy (progress.json)."""
    try:
        return bool(json.loads(paths.progress.read_text()).get("waiting"))
    except (OSError, ValueError, AttributeError):
        return False


def deterministic_torch() -> None:
    """Only ops that give the same bits on every run (`--deterministic`): an op without such an
    implementation raises instead of silently varying; cuBLAS needs its workspace pinned too.
    On CPU, with the thread count fixed, the ops the trainer uses already are."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
