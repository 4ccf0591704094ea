"""`-m DIR` and `--adapter DIR`: which model strings are directories, and whether a directory
is a whole model or a LoRA adapter, decided from its files alone (no torch), so a wrong one is
refused before anything is installed, written or loaded.

A model directory is what `save_pretrained` writes (a Hugging Face download, `prime train
export --merge`); an adapter directory is PEFT's (`prime train export` without `--merge`). Both
run in-process, by the `local` model provider (local_model).
"""

from __future__ import annotations

from pathlib import Path

from prime_env.errors import ModelConfigError
from registry_index.peft_adapter import CONFIG as ADAPTER_CONFIG

MODEL_CONFIG = "config.json"


def looks_like_path(text: str) -> bool:
    """TEXT spelled as a path (./x, ../x, /x, ~/x): never a provider's model name (`-m`) nor
    an environment's OWNER/NAME (ENV)."""
    return text.startswith(("./", "../", "/", "~")) or text in (".", "..")


def check_model_dir(path: Path) -> Path:
    """`path` resolved, if it is a Hugging Face model directory; else ModelConfigError."""
    path = path.expanduser().resolve()
    if not path.is_dir():
        raise ModelConfigError(
            f"model directory {path} does not exist; -m takes provider/model, an alias, or a "
            "Hugging Face model directory"
        )
    if (path / ADAPTER_CONFIG).is_file() and not (path / MODEL_CONFIG).is_file():
        raise ModelConfigError(
            f"{path} is a LoRA adapter, not a model: evaluate it on its base with "
            f"-m BASE --adapter {path} (e.g. -m local/smollm2-135m --adapter {path}), or "
            "merge it first (prime train export RUN --merge -o DIR)"
        )
    if not (path / MODEL_CONFIG).is_file():
        raise ModelConfigError(
            f"{path} is not a Hugging Face model directory (no {MODEL_CONFIG}); give a "
            "directory written by save_pretrained or by `prime train export --merge`"
        )
    return path


def check_adapter_dir(path: Path) -> Path:
    """`path` resolved, if it is a PEFT (LoRA) adapter directory; else ModelConfigError."""
    path = path.expanduser().resolve()
    if not (path / ADAPTER_CONFIG).is_file():
        hint = (
            f"; it is a whole model: evaluate it with -m {path}"
            if (path / MODEL_CONFIG).is_file()
            else ": give a directory written by `prime train export` (without --merge)"
        )
        raise ModelConfigError(
            f"--adapter {path} is not a LoRA adapter (no {ADAPTER_CONFIG}){hint}"
        )
    return path
