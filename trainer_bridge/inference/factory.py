"""Which inference backend a run uses, and the factory that starts it (and starts it again).

`auto` is engines.choice's rule (vLLM on CUDA when installed, the in-process torch sampler on
CPU), and `external` when `inference.urls` name servers that are already running. With `vllm`
the servers are children of the run, one per url (a free loopback port when none is given),
started from the engine `prime engine install vllm` installed, with runtime LoRA loading.
"""

from __future__ import annotations

import asyncio
import shlex
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlparse

from engines.choice import Choice, choose
from engines.install import EngineError, cuda_present, find_vllm
from engines.served_models import model_directory
from engines.vllm_server import (
    START_TIMEOUT_S,
    ServerError,
    ServerSpec,
    local_url,
    server_argv,
    server_env,
)
from trainer_bridge.children import ChildProcesses
from trainer_bridge.config import ConfigError, TrainConfig
from trainer_bridge.inference.base import BackendFactory, InferenceBackend
from trainer_bridge.protocol.run_dir import RunDir

_chosen: dict[str, Choice] = {}


def backend_choice(config: TrainConfig) -> Choice:
    """The engine for this config, and why (asked once per process: `auto` probes the GPU)."""
    key = f"{config.inference.backend}:{bool(config.inference.urls)}"
    if key not in _chosen:
        _chosen[key] = choose(config.inference.backend, external=bool(config.inference.urls))
    return _chosen[key]


def backend_kind(config: TrainConfig) -> str:
    return backend_choice(config).kind


def check_servable(config: TrainConfig) -> None:
    """Refuse, before anything starts, what the vLLM backend cannot do: a bare LoRA adapter
    directory as the model, full fine-tuning (vLLM serves the policies as LoRA adapters), an
    engine that is not installed. A Lab (`lab`) is asked whether it trains this config for
    this token (trainer_bridge.lab.connect)."""
    if backend_kind(config) == "lab":
        from trainer_bridge.lab.connect import check_lab, lab_key

        check_lab(config, lab_key())
        return
    if backend_kind(config) not in ("vllm", "external"):
        return
    name = config.model.name
    path = Path(name)
    if (path / "adapter_config.json").is_file() and not (path / "config.json").is_file():
        raise ConfigError(
            f"{name} is a LoRA adapter, not a model: vLLM serves the model it was trained on; "
            "merge it first with `prime train export RUN_DIR --merge -o DIR` and pass -m DIR"
        )
    if config.model.lora is None:
        raise ConfigError(
            "full fine-tuning (model.lora = false) cannot sample through vLLM: its policies are "
            "hot-loaded as LoRA adapters, and reloading the full weights every step needs vLLM's "
            "weight-transfer API (NCCL, GPUs); train a LoRA or use --backend torch"
        )
    if backend_kind(config) == "vllm":
        try:
            find_vllm()
        except EngineError as exc:
            raise ConfigError(str(exc)) from None


def server_specs(config: TrainConfig, *, resolve: bool = True) -> list[ServerSpec]:
    """The servers a `vllm` run starts: one per `inference.urls` entry, else one on a free
    loopback port, each loading the model's directory (`local/…` converted once; with
    `resolve=False`, as `--dry-run` shows it, the name as given)."""
    assert config.model.lora is not None  # check_servable
    urls = config.inference.urls or [local_url()]
    model = model_directory(config.model.name) if resolve else config.model.name
    return [
        ServerSpec(
            model=model,
            served_name=config.model.name,
            url=url,
            dtype=config.model.dtype,
            lora_rank=config.model.lora.rank,
            max_loras=config.inference.max_loras or config.orchestrator.max_off_policy_steps + 2,
            gpu_memory_utilization=config.inference.gpu_memory_utilization,
            extra_args=list(config.inference.extra_args),
        )
        for url in urls
    ]


def served_dtype(config: TrainConfig) -> str:
    """The precision our servers compute in: the model's, float32 on CPU for `auto`."""
    if config.model.dtype != "auto":
        return config.model.dtype
    return "bfloat16" if cuda_present() else "float32"


def inference_commands(config: TrainConfig) -> dict[str, dict[str, str]]:
    """What `--dry-run` shows of inference: per host, each process's command line."""
    kind = backend_kind(config)
    if kind == "torch":
        return {"localhost": {"inference": "in-process torch sampler (backend torch)"}}
    if kind == "external":
        return {"localhost": {"inference": "external servers: " + ", ".join(config.inference.urls)}}
    if kind == "lab":
        return {"localhost": {"inference": f"the Lab at {config.inference.urls[0]} (tinker SDK)"}}
    engine = find_vllm()
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(server_env({}).items()))
    hosts: dict[str, dict[str, str]] = {}
    for i, spec in enumerate(server_specs(config, resolve=False)):
        host = urlparse(spec.url).hostname or "127.0.0.1"
        name = "localhost" if host in ("127.0.0.1", "localhost", "::1") else host
        line = f"{env} {shlex.join(server_argv(engine, spec))}"
        hosts.setdefault(name, {})[f"inference[{i}]"] = line
    return hosts


def make_backend_factory(
    config: TrainConfig,
    children: ChildProcesses,
    run: RunDir,
    say: Callable[[str], None] = lambda _line: None,
) -> BackendFactory:
    """The backend's factory; with `vllm` the servers start now (said on `say`: minutes)."""
    kind = backend_kind(config)

    async def torch_backend() -> InferenceBackend:
        from trainer_bridge.inference.torch_backend import TorchBackend

        backend = TorchBackend(config.model, threads=config.inference.threads)
        await backend.client().ensure_loaded()
        return backend

    if kind == "torch":
        return torch_backend
    if kind == "lab":
        return lab_backend_factory(config)
    specs = server_specs(config) if kind == "vllm" else []
    urls = [spec.url for spec in specs] or list(config.inference.urls)

    async def vllm_backend() -> InferenceBackend:
        from local_model.models import load_tokenizer
        from trainer_bridge.inference.vllm_backend import VLLMBackend

        source = specs[0].model if specs else config.model.name
        tokenizer = await asyncio.to_thread(load_tokenizer, source)
        dtype = served_dtype(config) if specs else None
        prefix = "" if specs else f"{run.run_id}-"  # a shared server: names of this run's own
        backend = VLLMBackend(config.model.name, urls, tokenizer, dtype=dtype, lora_prefix=prefix)
        started = time.monotonic()
        await backend.wait_ready(timeout_s=START_TIMEOUT_S if specs else 60, check=children.check)
        if specs:
            say(f"vLLM ready after {time.monotonic() - started:.0f} s")
        return backend

    if specs and not any(c.name.startswith("vllm") for c in children.started):
        try:
            engine = find_vllm()
        except EngineError as exc:
            raise ServerError(str(exc)) from None
        for i, spec in enumerate(specs):
            argv = server_argv(engine, spec)
            log = run.logs / f"vllm_{i}.log"
            children.start(f"vllm[{i}]", argv, log, env=server_env())
            say(
                f"starting vLLM ({engine.distribution} {engine.version}) at {spec.url}: 1-3 "
                f"minutes on CPU (log: {log})"
            )
    return vllm_backend


def lab_backend_factory(config: TrainConfig) -> BackendFactory:
    """The `lab` backend: sampling clients of the Lab at `inference.urls[0]`, the prompts
    rendered here with the model's tokenizer."""

    async def lab_backend() -> InferenceBackend:
        from local_model.models import load_tokenizer
        from trainer_bridge.inference.lab_backend import LabBackend
        from trainer_bridge.lab.connect import lab_key, lab_url

        tokenizer = await asyncio.to_thread(load_tokenizer, config.model.name)
        key, url = lab_key(), lab_url(config)
        return await asyncio.to_thread(LabBackend, config.model.name, url, key, tokenizer)

    return lab_backend
