"""What the Lab asks of the machine that trains and samples: the `LabEngine` protocol.

The hub owns tenants, sessions, futures, queueing and checkpoints; the engine owns one base
model in memory and the LoRA adapters on it, named by the Lab. It is given, not imported: the
torch engine (`trainer_bridge.lab.engine.TorchLabEngine`) is passed to `create_app` by
`prime hub serve --lab`, so the hub never imports torch. The protocol speaks plain values
(numpy arrays, one per datum; a sample request as a `SampleCall`, which the engine reads by
its fields, structurally), so neither side imports the other's types. A `ValueError` from the
engine is the caller's mistake (its message is the answer); anything else is the Lab's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

# (tokens, logprobs, stop reason "stop" | "length") of one sampled sequence
SampledTokens = tuple[list[int], list[float], str]


@dataclass(frozen=True)
class SampleCall:
    """One sample request: `num_samples` continuations of `prompt` by adapter `adapter` (the
    base model when None); `params`: max_tokens, temperature, top_k, top_p, seed."""

    adapter: str | None
    prompt: list[int]
    num_samples: int
    params: dict[str, float | int | None]
    stop_tokens: list[int]
    stop_strings: list[str]


class LabEngine(Protocol):
    """One base model, many adapters. Called from one thread at a time (the Lab's worker)."""

    base_model: str
    max_context: int

    def create_adapter(
        self, name: str, rank: int, seed: int | None, train_mlp: bool, train_attn: bool
    ) -> None: ...

    def delete_adapter(self, name: str) -> None: ...

    def copy_adapter(self, source: str, target: str) -> None:
        """A frozen copy of `source`'s weights under `target` (a sampler's snapshot)."""
        ...

    def forward_backward(
        self,
        name: str,
        tokens: list[np.ndarray],
        inputs: list[dict[str, np.ndarray]],
        loss_fn: str,
        config: dict[str, float],
        forward_only: bool,
    ) -> tuple[list[dict[str, np.ndarray]], dict[str, float]]:
        """Per datum the loss's outputs (`logprobs`, `elementwise_loss`), and metrics named
        `name:reduction`; gradients accumulate unless `forward_only`."""
        ...

    def optim_step(self, name: str, adam: dict[str, float]) -> dict[str, float]: ...

    def sample_batch(
        self,
        calls: list[SampleCall],
        more: Callable[[int], list[SampleCall]],
        done: Callable[[int, list[SampledTokens] | ValueError], None],
    ) -> None:
        """Decode `calls` together, every row by its own call's adapter and sampling params,
        each call's sequences exactly what it would get alone. `more(rows)`, asked between two
        tokens with the number of rows decoding, may give calls that join the batch.
        `done(i, outcome)` hears of call `i` (numbered in the order given, joiners after) once
        all its rows have ended, or of its mistake (a ValueError) at once."""
        ...

    def prompt_logprobs(self, name: str | None, prompt: list[int]) -> list[float]:
        """log p(prompt[i] | prompt[:i]) for i >= 1 (the base model when `name` is None)."""
        ...

    def save(self, name: str, optimizer: bool) -> bytes:
        """The adapter as a tar of a PEFT adapter directory (adapter_config.json,
        adapter_model.safetensors: what `prime eval run --adapter` reads), with its optimizer
        state beside them (optimizer.pt) when asked."""
        ...

    def load(self, name: str, archive: bytes, optimizer: bool) -> None:
        """Adapter `name` (created or replaced) from `save`'s archive."""
        ...
