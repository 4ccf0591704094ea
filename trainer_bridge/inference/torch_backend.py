"""The `torch` backend: sampling in the orchestrator's process with transformers (CPU default).

It is prime_env's `LocalClient` (batched generation in one worker thread) over the trainer's
own model definition: the same base weights and the same LoRA wrapping, so a broadcast's
adapter tensors drop straight in. `publish` swaps them between batches (inside the client's
`exclusive()`), and every response carries the version that generated it. One thread: the
trainer process has the other core.
"""

from __future__ import annotations

import asyncio
from typing import Any

from local_model.client import LocalClient
from trainer_bridge.config import ModelConfig
from trainer_bridge.protocol.policy import PolicyError, PolicyRef, apply_weights, load_weights
from trainer_bridge.trainer.modeling import add_lora, load_base, right_pad, token_logprobs

BASE_VERSION = 0


class TorchBackend:
    """InferenceBackend over an in-process transformers model (see inference/base.py)."""

    def __init__(self, model: ModelConfig, *, threads: int = 1, max_batch: int = 64) -> None:
        self._config = model
        self._client = LocalClient(
            model.name, max_batch=max_batch, threads=threads, loader=self._load
        )
        self._client.policy_version = BASE_VERSION
        self._closed = False

    def _load(self) -> tuple[Any, Any]:
        base, tokenizer = load_base(self._config)
        return add_lora(base, self._config), tokenizer

    @property
    def model(self) -> Any:
        return self._client._model

    @property
    def tokenizer(self) -> Any:
        return self._client._tokenizer

    @property
    def dtype(self) -> str:
        """The precision it serves in ("float32", "bfloat16"): the probe's tolerance follows it."""
        return str(next(self.model.parameters()).dtype).removeprefix("torch.")

    @property
    def version(self) -> int:
        return int(self._client.policy_version or 0)

    def client(self) -> LocalClient:
        return self._client

    def set_threads(self, threads: int) -> None:
        """torch threads from the next generated batch on (the other process may be idle)."""
        self._client.threads = threads

    async def publish(self, policy: PolicyRef) -> None:
        if policy.version <= self.version:
            raise PolicyError(
                f"policy {policy.version} is not newer than the served {self.version}: "
                "versions are never reused"
            )
        await self._client.ensure_loaded()
        if (policy.kind == "lora") != (self._config.lora is not None):
            raise PolicyError(
                f"policy {policy.version} is a {policy.kind} broadcast but the backend's model is "
                f"{'LoRA' if self._config.lora else 'fully fine-tuned'}"
            )
        tensors = await asyncio.to_thread(load_weights, policy)
        await asyncio.to_thread(self._swap, policy, tensors)

    def _swap(self, policy: PolicyRef, tensors: dict[str, Any]) -> None:
        with self._client.exclusive():  # the batch in flight finishes on the old policy
            apply_weights(self.model, policy, tensors)
            self._client.policy_version = policy.version

    def served_versions(self) -> set[int]:
        return {self.version}

    async def score(self, version: int, token_ids: list[int]) -> list[float]:
        await self._client.ensure_loaded()
        return await asyncio.to_thread(self._score, version, token_ids)

    def _score(self, version: int, token_ids: list[int]) -> list[float]:
        import torch

        with self._client.exclusive(), torch.inference_mode():
            if version != self.version:
                raise PolicyError(f"policy {version} is not served (serving {self.version})")
            device = next(self.model.parameters()).device
            padded = right_pad([token_ids], 0, device)
            logprobs, _ = token_logprobs(self.model, padded.input_ids, padded.attention_mask)
        return [float(x) for x in logprobs[0, 1 : len(token_ids)]]

    async def health(self) -> bool:
        return not self._closed

    async def close(self) -> None:
        self._closed = True
        await self._client.aclose()
