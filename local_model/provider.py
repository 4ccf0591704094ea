"""The `local` model provider that `prime_env` finds through its `prime.model_providers` entry
point (sdk/pyproject.toml), so `-m local/<name>`, `-m DIR` and `--adapter DIR` work while the
SDK never imports torch."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

from local_model.models import LOCAL_MODELS
from prime_env.clients.base import ModelClient


class LocalProvider:
    """`local/<name>` (the models of `LOCAL_MODELS`) and Hugging Face model directories, with a
    LoRA adapter on top when asked, each run by a `LocalClient`: batched, on CPU."""

    def models(self) -> Collection[str]:
        return LOCAL_MODELS.keys()

    def create_client(self, model: str, adapter: str | None = None) -> ModelClient:
        from local_model.client import LocalClient  # torch: only once a client is made

        if model in LOCAL_MODELS and adapter is None:
            return LocalClient(model)

        def load() -> tuple[Any, Any]:
            from local_model.model_dirs import load_model_dir, with_adapter
            from local_model.models import load_local_model

            if model in LOCAL_MODELS:
                base, tokenizer = load_local_model(model)
            else:
                base, tokenizer = load_model_dir(Path(model))
            return (with_adapter(base, Path(adapter)) if adapter else base), tokenizer

        name = f"local/{model}" if model in LOCAL_MODELS else model
        return LocalClient(f"{name}+{adapter}" if adapter else name, loader=load)


PROVIDER = LocalProvider()
