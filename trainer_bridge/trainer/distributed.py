"""The trainer under torchrun: the process group, FSDP2 per decoder layer, rank-0 broadcasts.

Every rank reads the whole batch file (so the global normalisers need no communication),
trains on its slice, and FSDP averages gradients over ranks; loss.py scales each rank's share
by the world size so the average is the one-process gradient. gloo on CPU, nccl on CUDA.
Sharded checkpoints are checkpoints/trainer_state.py's.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from typing import Any, cast

import torch
import torch.distributed as dist

from trainer_bridge.protocol.policy import Probe, write_policy
from trainer_bridge.protocol.run_dir import RunDir
from trainer_bridge.protocol.stable import is_stable
from trainer_bridge.trainer.loss import LossStats


@dataclass
class Dist:
    """This process's place among the trainer's ranks (one rank without torchrun)."""

    rank: int = 0
    world_size: int = 1

    @property
    def main(self) -> bool:
        return self.rank == 0


def init_process_group() -> Dist:
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend=backend)
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    return Dist(rank=dist.get_rank(), world_size=dist.get_world_size())


def shard_model(scorer: Any) -> None:
    """`fully_shard` each decoder layer, then the root: the TokenScorer around the policy
    (embeddings, final norm and LM head are gathered by its forward)."""
    from torch.distributed.fsdp import fully_shard

    from trainer_bridge.trainer.modeling import causal_lm

    for layer in causal_lm(scorer.model).get_decoder().layers:
        fully_shard(layer)
    fully_shard(scorer)


def max_over_ranks(value: int) -> int:
    tensor = torch.tensor([value], dtype=torch.long)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return int(tensor.item())


def sum_over_ranks(stats: LossStats, loss: float, samples: float) -> tuple[LossStats, float, float]:
    """The step's statistics over the whole batch, not just this rank's share."""
    names = [f.name for f in fields(LossStats)]
    values = [getattr(stats, name) for name in names]
    tensor = torch.tensor([*values, loss, samples], dtype=torch.float64)
    dist.all_reduce(tensor)
    *total, loss_sum, samples_sum = tensor.tolist()
    # each rank's loss was scaled by the world size (see loss.py): the sum over-counts by it
    return LossStats(**dict(zip(names, total))), loss_sum / dist.get_world_size(), samples_sum


def _full_trainable_state(model: Any) -> dict[str, torch.Tensor]:
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    state = get_model_state_dict(model, options=options)
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    return {n: cast(torch.Tensor, t) for n, t in state.items() if n in trainable or not trainable}


def publish_sharded(model: Any, run: RunDir, version: int, probe: Probe, *, main: bool) -> None:
    """Gather the full adapter on rank 0 (a collective: every rank calls it) and write it there."""
    if is_stable(run.broadcast(version)):
        return
    state = _full_trainable_state(model)
    if main:
        write_policy(run.root, version, _Unsharded(model, state), probe)
    dist.barrier()


class _Unsharded:
    """What write_policy needs from a model, over gathered full tensors."""

    def __init__(self, model: Any, state: dict[str, torch.Tensor]) -> None:
        self._model = model
        self._state = state
        if hasattr(model, "peft_config"):
            self.peft_config = model.peft_config
        self.config = getattr(model, "config", None)

    def save_pretrained(self, directory: Any) -> None:
        from peft.utils import get_peft_model_state_dict

        model = self._model
        adapter = get_peft_model_state_dict(model, state_dict=self._state)
        from safetensors.torch import save_file

        save_file(
            {k: v.contiguous() for k, v in adapter.items()},
            str(directory / "adapter_model.safetensors"),
        )
        model.peft_config["default"].save_pretrained(str(directory))

    def state_dict(self) -> dict[str, torch.Tensor]:
        return self._state
