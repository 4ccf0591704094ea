"""The trainer under torchrun: FSDP2 per decoder layer, DCP checkpoints, rank-0 broadcasts.

Every rank reads the whole batch file (so the global normalisers need no communication),
trains on its slice, and FSDP averages gradients over ranks; loss.py scales each rank's share
by the world size so the average is the one-process gradient. gloo on CPU, nccl on CUDA.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, cast

import torch
import torch.distributed as dist

from trainer_bridge.protocol.policy import Probe, write_policy
from trainer_bridge.protocol.stable import is_stable, stable_dir
from trainer_bridge.trainer.loss import LossStats

if TYPE_CHECKING:
    from trainer_bridge.trainer.trainer import Dist, Trainer


def init_process_group() -> Dist:
    from trainer_bridge.trainer.trainer import Dist

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
    values = [stats.tokens, stats.clipped, stats.mismatch_kl, stats.entropy, stats.ref_kl]
    tensor = torch.tensor([*values, loss, samples], dtype=torch.float64)
    dist.all_reduce(tensor)
    total = tensor.tolist()
    # each rank's loss was scaled by the world size (see loss.py): the sum over-counts by it
    return LossStats(*total[:5]), total[5] / dist.get_world_size(), total[6]


def _full_trainable_state(trainer: Trainer) -> dict[str, torch.Tensor]:
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    state = get_model_state_dict(trainer.model, options=options)
    trainable = {n for n, p in trainer.model.named_parameters() if p.requires_grad}
    return {n: cast(torch.Tensor, t) for n, t in state.items() if n in trainable or not trainable}


def publish_sharded(trainer: Trainer, version: int, probe: Probe) -> None:
    """Gather the full adapter on rank 0 (a collective: every rank calls it) and write it there."""
    if is_stable(trainer.paths.broadcast(version)):
        return
    state = _full_trainable_state(trainer)
    if trainer.dist.main:
        write_policy(trainer.run_dir, version, _Unsharded(trainer, state), probe)
    dist.barrier()


class _Unsharded:
    """What write_policy needs from a model, over gathered full tensors."""

    def __init__(self, trainer: Trainer, state: dict[str, torch.Tensor]) -> None:
        self._trainer = trainer
        self._state = state
        if hasattr(trainer.model, "peft_config"):
            self.peft_config = trainer.model.peft_config
        self.config = getattr(trainer.model, "config", None)

    def save_pretrained(self, directory: Any) -> None:
        from peft.utils import get_peft_model_state_dict

        model = self._trainer.model
        adapter = get_peft_model_state_dict(model, state_dict=self._state)
        from safetensors.torch import save_file

        save_file(
            {k: v.contiguous() for k, v in adapter.items()},
            str(directory / "adapter_model.safetensors"),
        )
        model.peft_config["default"].save_pretrained(str(directory))

    def state_dict(self) -> dict[str, torch.Tensor]:
        return self._state


def save_sharded_checkpoint(trainer: Trainer, step: int) -> None:
    """DCP: each rank writes its shards of weights and optimizer; rank 0 marks STABLE."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model_state, optim_state = get_state_dict(trainer.model, trainer.optimizer)
    directory = trainer.ckpt_dir(step)
    scratch = directory.parent / f".{directory.name}.dcp"
    dcp.save({"model": model_state, "optim": optim_state}, checkpoint_id=str(scratch))
    dist.barrier()
    if trainer.dist.main:
        with stable_dir(directory, overwrite=True) as out:
            os.rename(scratch, out / "dcp")
            torch.save(
                {
                    "scheduler": trainer.scheduler.state_dict(),
                    "torch_rng": torch.get_rng_state(),
                },
                out / "state.pt",
            )
    dist.barrier()


def load_sharded_checkpoint(trainer: Trainer, step: int) -> None:
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    directory = trainer.ckpt_dir(step)
    model_state, optim_state = get_state_dict(trainer.model, trainer.optimizer)
    state: dict[str, Any] = {"model": model_state, "optim": optim_state}
    dcp.load(state, checkpoint_id=str(directory / "dcp"))
    set_state_dict(
        trainer.model,
        trainer.optimizer,
        model_state_dict=state["model"],
        optim_state_dict=state["optim"],
    )
    extra = torch.load(directory / "state.pt", weights_only=False)
    trainer.scheduler.load_state_dict(extra["scheduler"])
    torch.set_rng_state(extra["torch_rng"])
