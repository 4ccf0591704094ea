"""The trainer of a `--lab` run: `python -m trainer_bridge.lab.trainer --run-dir DIR`.

The local trainer's loop (trainer/trainer.py) with the Lab doing the arithmetic: for each step
N it waits for `batches/step_N/`, sends the batch as Tinker datums (`datums.lab_batch`: the
run's loss, normalised as locally) in calls of `micro_batch_tokens`, then one `optim_step`
(AdamW at the stage's scheduled lr, betas, weight decay, clip norm), and publishes policy N+1:
the Lab saves it for sampling (`sampler_weights/step_{N+1}`), its probe is the Lab's `forward`
of the probe tokens, and its PEFT files come back into `broadcasts/step_{N+1}/` (what `prime
train export` reads). Every `ckpt.interval` steps `save_state` keeps adapter and optimizer on
the Lab, named in `checkpoints/step_N/trainer/lab.json`; a resume continues from it. A stage
starts a fresh AdamW, as locally: its weights are reloaded without the optimizer state.

The token comes in $TINKER_API_KEY (`connect.KEY_VARIABLE`), never from the run directory.
Any failure of the Lab (down, 401/403, quota) ends this process with the Lab's message: the
run stops (exit 1, resumable); nothing is trained or scored on a failed call.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np
import tinker
from tinker import types

from hub_client.lab import fetch_adapter, tinker_key
from trainer_bridge.checkpoints import trainer_state
from trainer_bridge.checkpoints.layout import trainer_part
from trainer_bridge.config import Stage, TrainConfig, stage_at
from trainer_bridge.config_loader import load_resolved
from trainer_bridge.lab.connect import KEY_VARIABLE, lab_url, quiet_queue_waits, targets
from trainer_bridge.lab.datums import LabBatch, LabDatum, chunks, lab_batch
from trainer_bridge.protocol.batches import read_batch, wait_for_batch
from trainer_bridge.protocol.policy import Probe, probe_token_ids, write_lab_policy
from trainer_bridge.protocol.run_dir import RunDir
from trainer_bridge.protocol.stable import is_stable, stable_dir
from trainer_bridge.trainer.schedule import lr_schedule
from trainer_bridge.usage import peak_rss_mb

STATE_FILE = "lab.json"
SAMPLER_KEEP = 4
"""Sampler checkpoints kept on the Lab (older ones are deleted: the broadcasts hold them)."""
ADAM_EPS = 1e-8  # torch AdamW's, as the local trainer
quiet_queue_waits()


class LabTrainer:
    """One LoRA training client on the Lab, driven step by step from the run's batches."""

    def __init__(self, run_dir: Path, config: TrainConfig, key: str) -> None:
        from local_model.models import load_tokenizer

        self.paths = RunDir(run_dir)
        self.config = config
        self.url = lab_url(config)
        self.key = key
        self.service = tinker.ServiceClient(base_url=self.url, api_key=tinker_key(key))
        self.probe_ids = probe_token_ids(load_tokenizer(config.model.name))
        self.plan = config.stage_plan()
        self.stage = self.plan[0]
        self.training: Any = None
        self.scheduler: Any = None

    # --- the model on the Lab -----------------------------------------------------------
    def _create(self) -> None:
        lora = self.config.model.lora
        assert lora is not None  # connect.check_lab
        attn, mlp = targets(lora.target_modules) or (True, True)
        self.training = self.service.create_lora_training_client(
            base_model=self.config.model.name,
            rank=lora.rank,
            seed=self.config.trainer.seed,
            train_mlp=mlp,
            train_attn=attn,
            train_unembed=False,
        ).result()

    def _restore(self, step: int, optimizer: bool) -> None:
        path = json.loads((trainer_part(self.paths, step) / STATE_FILE).read_text())["path"]
        if optimizer:
            future = self.service.create_training_client_from_state_with_optimizer(path)
        else:
            future = self.service.create_training_client_from_state(path)
        self.training = future.result()

    def _enter(self, stage: Stage, done: int) -> None:
        """The stage's schedule, at step `done` of the run."""
        import torch

        self.stage = stage
        tc = stage.config.trainer
        holder = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=tc.optim.lr)
        self.scheduler = lr_schedule(holder, tc, stage.steps)
        for _ in range(done - stage.start):
            holder.step()
            self.scheduler.step()

    def _fresh_optimizer(self) -> None:
        """A new stage's AdamW: the weights reloaded without the optimizer state."""
        name = f"stage_{self.stage.index}"
        path = self.training.save_state(name).result().path
        self.training.load_state(path).result()

    # --- one step -----------------------------------------------------------------------
    def train_step(self, batch: LabBatch) -> dict[str, float]:
        started, cpu_started = time.perf_counter(), time.process_time()
        lr = float(self.scheduler.get_last_lr()[0])
        self.scheduler.optimizer.step()
        self.scheduler.step()
        if not batch.rl and not batch.ce:
            return {"lr": lr, "skipped": 1.0, "samples": 0.0, "loss_tokens": 0.0}
        budget = self.config.trainer.micro_batch_tokens
        calls = [
            (part, self.training.forward_backward(_datums(part), loss, config))
            for datums, loss, config in (
                (batch.rl, batch.loss_fn, batch.loss_config),
                (batch.ce, "cross_entropy", {}),
            )
            for part in chunks(datums, budget)
        ]
        optim = self.stage.config.trainer.optim
        step = self.training.optim_step(
            types.AdamParams(
                learning_rate=lr,
                beta1=optim.betas1,
                beta2=optim.betas2,
                eps=ADAM_EPS,
                weight_decay=optim.weight_decay,
                grad_clip_norm=optim.max_norm or 0.0,
            )
        )
        loss, mismatch, ce_nll = 0.0, 0.0, 0.0
        for part, future in calls:
            out = future.result()
            loss += float(out.metrics.get("loss:sum", 0.0))
            for datum, result in zip(part, out.loss_fn_outputs, strict=True):
                logprobs = result["logprobs"].to_numpy()
                if datum.mask is not None:  # an `rl` datum: k3(log π_θ − log μ), loss tokens
                    gap = logprobs - datum.inputs["logprobs"]
                    mismatch += float(((np.expm1(gap) - gap) * datum.mask).sum())
                else:
                    ce_nll += float((-logprobs * (datum.inputs["weights"] > 0)).sum())
        grad_norm = float(step.result().metrics.get("grad_norm:mean", 0.0))
        return {
            "loss": loss,
            "lr": lr,
            "grad_norm": grad_norm,
            "mismatch_kl": mismatch / max(batch.rl_tokens, 1.0),
            "loss_tokens": batch.rl_tokens,
            "ce_loss": ce_nll / max(batch.ce_tokens, 1.0),
            "ce_tokens": batch.ce_tokens,
            "samples": float(len(batch.rl) + len(batch.ce)),
            "micro_batches": float(len(calls)),
            "train_s": time.perf_counter() - started,
            "train_cpu_s": time.process_time() - cpu_started,
        }

    # --- policies and checkpoints -------------------------------------------------------
    def publish(self, version: int) -> None:
        if is_stable(self.paths.broadcast(version)):
            return
        saved = self.training.save_weights_for_sampler(f"step_{version}")
        probe_datum = types.Datum(
            model_input=types.ModelInput.from_ints(self.probe_ids[:-1]),
            loss_fn_inputs={"target_tokens": _ints(self.probe_ids[1:])},
        )
        scored = self.training.forward([probe_datum], "cross_entropy").result()
        logprobs = [float(x) for x in scored.loss_fn_outputs[0]["logprobs"].to_numpy()]
        path = saved.result().path
        files = fetch_adapter(self.url, self.key, path)
        write_lab_policy(self.paths.root, version, files, Probe(self.probe_ids, logprobs), path)
        if version >= SAMPLER_KEEP:
            self._delete(f"sampler_weights/step_{version - SAMPLER_KEEP}")

    def save_checkpoint(self, step: int) -> None:
        path = self.training.save_state(f"step_{step}").result().path
        with stable_dir(trainer_part(self.paths, step), overwrite=True) as scratch:
            (scratch / STATE_FILE).write_text(json.dumps({"path": path, "stage": self.stage.index}))
        keep = self.config.ckpt.keep_last
        if keep:
            for old in trainer_state.stable_steps(self.paths)[:-keep]:
                self._delete(f"weights/step_{old}")
            trainer_state.prune(self.paths, keep)

    def _delete(self, checkpoint: str) -> None:
        """Free a checkpoint's quota on the Lab; one already gone is fine."""
        try:
            rest = self.service.create_rest_client()
            rest.delete_checkpoint(self.training.model_id, checkpoint).result()
        except (tinker.NotFoundError, tinker.BadRequestError):
            pass  # not there (deleted before this trainer restarted)

    # --- the loop -----------------------------------------------------------------------
    def run(self, resume_step: int | None) -> None:
        stable = trainer_state.stable_steps(self.paths)
        start = resume_step if resume_step is not None else (stable[-1] if stable else 0)
        stage = stage_at(self.plan, start)
        if start:
            # at a stage's first step the stage starts afresh: weights only
            self._restore(start, optimizer=start != stage.start)
        else:
            self._create()
        self._enter(stage, start)
        self.publish(start)
        self.paths.trim_trainer_metrics(start)
        interval = self.config.ckpt.interval
        for step in range(start, self.config.max_steps):
            stage = stage_at(self.plan, step)
            if stage.index != self.stage.index:
                self._enter(stage, step)
                self._fresh_optimizer()
            waited = wait_for_batch(self.paths.root, step)
            samples = read_batch(self.paths.root, step).samples
            metrics = self.train_step(lab_batch(samples, self.stage.config.trainer))
            self.publish(step + 1)
            done = step + 1
            if (interval and done % interval == 0) or done == self.config.max_steps:
                self.save_checkpoint(done)
            metrics.update(
                step=step, stage=self.stage.index, wait_s=waited, peak_rss_mb=peak_rss_mb()
            )
            with self.paths.trainer_metrics.open("a") as out:
                out.write(json.dumps(metrics) + "\n")


def _datums(part: list[LabDatum]) -> list[types.Datum]:
    return [
        types.Datum(
            model_input=types.ModelInput.from_ints(list(d.tokens)),
            loss_fn_inputs={k: types.TensorData.from_numpy(v) for k, v in d.inputs.items()},
        )
        for d in part
    ]


def _ints(values: list[int]) -> types.TensorData:
    return types.TensorData.from_numpy(np.asarray(values, dtype=np.int64))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer_bridge.lab.trainer")
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--resume-step", type=int, default=None)
    args = parser.parse_args(argv)
    key = os.environ.get(KEY_VARIABLE)
    if not key:
        print(f"lab trainer: no token in ${KEY_VARIABLE}", file=sys.stderr)
        return 2
    try:
        config = load_resolved(RunDir(args.run_dir).resolved_config)
    except (OSError, ValueError) as exc:
        print(
            f"lab trainer: cannot read {args.run_dir}/config/resolved.toml: {exc}", file=sys.stderr
        )
        return 2
    try:
        LabTrainer(args.run_dir, config, key).run(args.resume_step)
    except Exception as exc:  # noqa: BLE001 - the Lab's failure, its words last in the log
        traceback.print_exc()
        print(f"lab trainer: the Lab at {lab_url(config)} failed: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
