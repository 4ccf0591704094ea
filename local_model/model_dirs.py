"""Any local model for the engine: a Hugging Face model directory (a download, a policy merged
by `prime train export --merge`) and a LoRA adapter (`prime train export`) on top of a base.

Weights load as float32, as `local/<name>` does and as `prime train`'s torch backend samples, so
a policy evaluated here computes what the trainer's own evals computed; the adapter goes through
peft's own loader onto the same LoRA layers the trainer wrapped the base with. Which directory
is which is checked first, without torch (prime_env.clients.model_paths).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from prime_env.clients.model_paths import check_adapter_dir, check_model_dir
from prime_env.errors import ModelConfigError


def load_model_dir(path: Path) -> tuple[Any, Any]:
    """(model, tokenizer) of a model directory, float32, in eval mode."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    path = check_model_dir(path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    model.eval()
    return model, tokenizer


def with_adapter(model: Any, adapter: Path) -> Any:
    """`model` with the LoRA adapter at `adapter` applied by peft, in eval mode."""
    try:
        from peft import PeftModel
    except ImportError:
        raise ModelConfigError(
            "--adapter needs peft: pip install 'prime-envhub[train]' (or pip install peft)"
        ) from None
    with warnings.catch_warnings():
        # peft reads transformers' deprecated `is_gradient_checkpointing` while wrapping: not a
        # call of ours, and a warning on every `--adapter` run (the trainer's add_lora, too).
        warnings.filterwarnings(
            "ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning
        )
        wrapped = PeftModel.from_pretrained(model, str(check_adapter_dir(adapter)))
    wrapped.eval()
    return wrapped
