"""The `local` model provider that `prime_env` finds through its `prime.model_providers` entry
point (sdk/pyproject.toml), so `-m local/<name>` works while the SDK never imports torch."""

from __future__ import annotations

from collections.abc import Collection

from local_model.models import LOCAL_MODELS
from prime_env.clients.base import ModelClient


class LocalProvider:
    """`local/<name>`: the models of `LOCAL_MODELS`, each run by a `LocalClient` on CPU."""

    def models(self) -> Collection[str]:
        return LOCAL_MODELS.keys()

    def create_client(self, model: str) -> ModelClient:
        from local_model.client import LocalClient  # torch: only once a client is made

        return LocalClient(model)


PROVIDER = LocalProvider()
