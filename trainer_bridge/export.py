"""`prime train export`: a trained policy as a standalone model directory.

Without `--merge` the broadcast's PEFT adapter is copied (what vLLM and peft load); with it the
adapter is merged into the base weights with peft's `merge_and_unload` and saved with the
tokenizer as a Hugging Face model directory any transformers user can load.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from trainer_bridge.config import ModelConfig
from trainer_bridge.protocol.policy import PolicyError, apply_weights, load_weights, read_policy
from trainer_bridge.protocol.run_dir import RunDir
from trainer_bridge.protocol.stable import stable_steps


class ExportError(Exception):
    """The policy cannot be exported; the message says why."""


def export_policy(
    run_root: Path, model: ModelConfig, out: Path, *, step: int | None = None, merge: bool = False
) -> Path:
    steps = stable_steps(run_root / "broadcasts")
    if not steps:
        raise ExportError(f"{run_root} has no complete policy broadcast yet")
    version = steps[-1] if step is None else step
    if version not in steps:
        raise ExportError(f"policy {version} is not in {run_root}/broadcasts (have {steps})")
    try:
        ref, _ = read_policy(RunDir(run_root).broadcast(version))
    except PolicyError as exc:
        raise ExportError(str(exc)) from None
    if out.exists() and any(out.iterdir()):
        raise ExportError(f"{out} exists and is not empty; choose a new directory")
    if not merge and ref.kind == "lora":
        shutil.copytree(ref.path, out, dirs_exist_ok=True, ignore=shutil.ignore_patterns("STABLE"))
        return out
    from trainer_bridge.trainer.modeling import add_lora, load_base

    base, tokenizer = load_base(model.model_copy(update={"device": "cpu", "dtype": "float32"}))
    policy = add_lora(base, model) if ref.kind == "lora" else base
    apply_weights(policy, ref, load_weights(ref))
    merged = policy.merge_and_unload() if ref.kind == "lora" else policy
    out.mkdir(parents=True, exist_ok=True)
    merged.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
