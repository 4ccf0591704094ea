"""The `vllm` model provider (`prime.model_providers` entry point, pyproject.toml): the
in-process models (`local/<name>`, a model directory, either with `--adapter`) served by a vLLM
server of this process instead of the torch engine. `prime eval run --backend vllm` runs its
models through it (`start_servers` first, so the minutes of a start are spent, and said,
before the eval's clock starts); the names it accepts are local_model's."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable

from engines.serving import adapter_rank, ensure_server
from local_model.models import LOCAL_MODELS
from prime_env.clients.base import ModelClient
from prime_env.clients.model_specs import ModelSpec


def served_name(model: str) -> str:
    """The model a spec's `model` names, as the server is asked for it (`local/…`, a dir)."""
    return f"local/{model}" if model in LOCAL_MODELS else model


class VLLMProvider:
    def models(self) -> Collection[str]:
        return LOCAL_MODELS.keys()

    def create_client(self, model: str, adapter: str | None = None) -> ModelClient:
        from engines.vllm_client import VLLMClient

        name = served_name(model)
        return VLLMClient(name, adapter, name=f"{name}+{adapter}" if adapter else name)


PROVIDER = VLLMProvider()


async def start_servers(specs: Iterable[ModelSpec], say: Callable[[str], None]) -> None:
    """Start the servers `specs` (those run by this provider) will use, each once, with LoRA
    up to the largest of its adapters, and load those adapters."""
    wanted: dict[str, list[str | None]] = {}
    for spec in specs:
        if spec.client == "vllm" and spec.base_url is None:
            wanted.setdefault(served_name(spec.model), []).append(spec.adapter)
    for model, adapters in wanted.items():
        ranks = [adapter_rank(a) for a in adapters if a is not None]
        await ensure_server(model, lora_rank=max(ranks) if ranks else None, say=say)
        for adapter in adapters:
            if adapter is not None:
                await ensure_server(model, adapter)
