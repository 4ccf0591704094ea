"""The trainer's half of a checkpoint: `checkpoints/step_N/trainer/` (its own `STABLE` last).

One process writes the trainable tensors (safetensors), the optimizer, scheduler and RNG states;
under torchrun every rank writes its shards of weights and optimizer (torch.distributed.checkpoint)
and rank 0 the scheduler and RNG beside them. The trainer resumes from the newest stable one.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from trainer_bridge.checkpoints.layout import trainer_part
from trainer_bridge.protocol.run_dir import RunDir
from trainer_bridge.protocol.stable import is_stable, stable_dir

TRAINABLE_FILE = "trainable.safetensors"
STATE_FILE = "state.pt"


@dataclass
class TrainerState:
    """What a checkpoint saves and restores (the model's trainable weights, the rest whole).

    `stage` is the index of the stage the optimizer and scheduler belong to: loading into
    another stage's (a resume at a stage's first step) restores the weights only."""

    model: Any
    optimizer: Any
    scheduler: Any
    stage: int = 0


def stable_steps(run: RunDir) -> list[int]:
    """The steps whose trainer half is complete, ascending (the orchestrator's may be missing)."""
    root = run.root / "checkpoints"
    if not root.is_dir():
        return []
    steps = []
    for child in root.iterdir():
        name = child.name
        if name.startswith("step_") and name[5:].isdigit() and is_stable(child / "trainer"):
            steps.append(int(name[5:]))
    return sorted(steps)


def save(run: RunDir, step: int, state: TrainerState, *, sharded: bool, main: bool) -> None:
    """Write step `step`'s trainer half; `sharded` under torchrun (every rank calls it)."""
    if sharded:
        _save_sharded(trainer_part(run, step), state, main)
        return
    with stable_dir(trainer_part(run, step), overwrite=True) as scratch:
        _save_local(scratch, step, state)


def load(run: RunDir, step: int, state: TrainerState, *, sharded: bool) -> None:
    """Restore step `step`'s trainer half into `state` (and the RNGs)."""
    if sharded:
        _load_sharded(trainer_part(run, step), state)
    else:
        _load_local(trainer_part(run, step), state)


def prune(run: RunDir, keep_last: int) -> None:
    """Remove all but the newest `keep_last` trainer halves (and their step, once empty)."""
    for old in stable_steps(run)[:-keep_last]:
        directory = trainer_part(run, old)
        shutil.rmtree(directory, ignore_errors=True)
        with contextlib.suppress(OSError):  # the orchestrator's half may still be there
            directory.parent.rmdir()


def _save_local(directory: Path, step: int, state: TrainerState) -> None:
    from safetensors.torch import save_file

    trainable = {n: p.detach().cpu() for n, p in state.model.named_parameters() if p.requires_grad}
    save_file(trainable, str(directory / TRAINABLE_FILE))
    torch.save(
        {
            "optimizer": state.optimizer.state_dict(),
            "scheduler": state.scheduler.state_dict(),
            "stage": state.stage,
            "torch_rng": torch.get_rng_state(),
            "python_rng": random.getstate(),
        },
        directory / STATE_FILE,
    )
    (directory / "trainer.json").write_text(json.dumps({"step": step}))


def _load_local(directory: Path, state: TrainerState) -> None:
    from safetensors.torch import load_file

    tensors = load_file(str(directory / TRAINABLE_FILE))
    params = dict(state.model.named_parameters())
    with torch.no_grad():
        for name, value in tensors.items():
            params[name].copy_(value)
    saved = torch.load(directory / STATE_FILE, weights_only=False)
    if saved.get("stage", 0) == state.stage:
        state.optimizer.load_state_dict(saved["optimizer"])
        state.scheduler.load_state_dict(saved["scheduler"])
    torch.set_rng_state(saved["torch_rng"])
    random.setstate(saved["python_rng"])


def _save_sharded(directory: Path, state: TrainerState, main: bool) -> None:
    """DCP: each rank writes its shards of weights and optimizer; rank 0 marks STABLE."""
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model_state, optim_state = get_state_dict(state.model, state.optimizer)
    scratch = directory.parent / f".{directory.name}.dcp"
    dcp.save({"model": model_state, "optim": optim_state}, checkpoint_id=str(scratch))
    dist.barrier()
    if main:
        with stable_dir(directory, overwrite=True) as out:
            os.rename(scratch, out / "dcp")
            torch.save(
                {
                    "scheduler": state.scheduler.state_dict(),
                    "stage": state.stage,
                    "torch_rng": torch.get_rng_state(),
                },
                out / STATE_FILE,
            )
    dist.barrier()


def _load_sharded(directory: Path, state: TrainerState) -> None:
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import (
        get_state_dict,
        set_model_state_dict,
        set_state_dict,
    )

    extra = torch.load(directory / STATE_FILE, weights_only=False)
    same_stage = extra.get("stage", 0) == state.stage
    model_state, optim_state = get_state_dict(state.model, state.optimizer)
    shards: dict[str, Any] = {"model": model_state}
    if same_stage:
        shards["optim"] = optim_state
    dcp.load(shards, checkpoint_id=str(directory / "dcp"))
    if same_stage:
        set_state_dict(
            state.model,
            state.optimizer,
            model_state_dict=shards["model"],
            optim_state_dict=shards["optim"],
        )
        state.scheduler.load_state_dict(extra["scheduler"])
    else:
        set_model_state_dict(state.model, shards["model"])
    torch.set_rng_state(extra["torch_rng"])
