"""Run by test_distributed under torchrun (and alone): one training step on batch 0, then the
full gradient of batch 1, saved by rank 0 to the file named on the command line."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file

from trainer_bridge.protocol.batches import read_batch
from trainer_bridge.trainer.distributed import Dist
from trainer_bridge.trainer.trainer import Trainer, load_run_config


def main() -> None:
    run_dir, out = Path(sys.argv[1]), sys.argv[2]
    dist = Dist()
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        from trainer_bridge.trainer.distributed import init_process_group

        dist = init_process_group()
    trainer = Trainer(run_dir, load_run_config(run_dir), dist)
    trainer.train_step(read_batch(run_dir, 0).samples)
    trainer.backward(read_batch(run_dir, 1).samples)
    grads = {}
    for name, param in trainer.model.named_parameters():
        if param.requires_grad:
            grad = param.grad
            grads[name] = grad.full_tensor() if hasattr(grad, "full_tensor") else grad
    if dist.main:
        save_file({k: v.contiguous() for k, v in grads.items()}, out)
    if dist.world_size > 1:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
