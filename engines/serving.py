"""vLLM servers this process starts for its clients (evals with `--backend vllm`, the Lab):
one per base model, its LoRA adapters loaded into it at run time, all stopped together.

A start costs 1-3 minutes, so a server outlives the client that started it and serves every
later client of the same model in the process (an eval set's cells); `stop_servers` ends them
(the CLI calls it on the way out; atexit and PDEATHSIG cover the rest). The log of each start
goes to the per-user log directory and is shown when the start fails.
"""

from __future__ import annotations

import asyncio
import atexit
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import platformdirs

from engines.install import find_vllm
from engines.process import Child, ChildDied, log_tail
from engines.served_models import model_directory
from engines.vllm_server import (
    ServerError,
    ServerSpec,
    local_url,
    server_argv,
    server_env,
    wait_ready,
)


@dataclass
class Server:
    """One running server and what it serves."""

    model: str  # the model as the user named it (local/…, a directory)
    url: str
    served_name: str
    tokenizer_source: str  # what load_tokenizer reads the model's tokenizer from
    log: Path
    child: Child
    lora: bool
    adapters: dict[str, str] = field(default_factory=dict)  # adapter dir -> its served name


@dataclass(frozen=True)
class Served:
    """What a client sends its requests to: the server and the model name to ask for."""

    url: str
    request_model: str
    tokenizer_source: str


_servers: dict[str, Server] = {}
_starting: dict[str, asyncio.Task[Server]] = {}


def log_dir() -> Path:
    return platformdirs.user_log_path("prime", appauthor=False) / "vllm"


def adapter_rank(adapter: str) -> int:
    """The LoRA rank `r` of a peft adapter directory."""
    try:
        return int(json.loads((Path(adapter) / "adapter_config.json").read_text())["r"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ServerError(f"{adapter} is not a LoRA adapter directory: {exc}") from None


async def ensure_server(
    model: str,
    adapter: str | None = None,
    *,
    lora_rank: int | None = None,
    say: Callable[[str], None] | None = None,
) -> Served:
    """The server for `model` (started when none runs), with `adapter` loaded when given.

    `lora_rank` starts the server with LoRA enabled up to that rank (the largest adapter a
    caller will load); an adapter alone enables it at its own rank."""
    if adapter is not None:
        lora_rank = max(lora_rank or 0, adapter_rank(adapter))
    server = _servers.get(model)
    if server is None:
        if model not in _starting:
            _starting[model] = asyncio.ensure_future(_start(model, lora_rank, say))
        try:
            server = await asyncio.shield(_starting[model])
        finally:
            _starting.pop(model, None)
    if adapter is None:
        return Served(server.url, server.served_name, server.tokenizer_source)
    return Served(server.url, await _load_adapter(server, adapter), server.tokenizer_source)


async def _start(model: str, lora_rank: int | None, say: Callable[[str], None] | None) -> Server:
    engine = find_vllm()
    directory = await asyncio.to_thread(model_directory, model)
    spec = ServerSpec(model=directory, served_name=model, url=local_url(), lora_rank=lora_rank)
    log = log_dir() / f"{time.strftime('%Y%m%d-%H%M%S')}-{Path(model).name}.log"
    child = Child("vllm", server_argv(engine, spec), log, env=server_env())
    child.start()  # the event loop's thread: PDEATHSIG follows the thread that forked
    atexit.register(stop_servers)
    if say is not None:
        say(f"starting vLLM {engine.version} for {model} (1-3 min; log: {log})")
    started = time.monotonic()
    try:
        await wait_ready(spec.url, check=child.check)
    except ChildDied as exc:
        child.stop(0)
        raise ServerError(
            f"the vLLM server for {model} exited while starting:\n{log_tail(log)}"
        ) from exc
    except BaseException:
        child.stop(0)
        raise
    if say is not None:
        say(f"vLLM serves {model} at {spec.url} (started in {time.monotonic() - started:.0f} s)")
    server = Server(model, spec.url, model, directory, log, child, lora=lora_rank is not None)
    _servers[model] = server
    return server


async def _load_adapter(server: Server, adapter: str) -> str:
    if adapter in server.adapters:
        return server.adapters[adapter]
    if not server.lora:
        raise ServerError(
            f"the vLLM server for {server.model} was started without LoRA; start it with the "
            "adapter (pass every --adapter up front)"
        )
    server.adapters[adapter] = await load_adapter(server.url, adapter)
    return server.adapters[adapter]


async def load_adapter(url: str, adapter: str) -> str:
    """Load the LoRA adapter directory `adapter` into the server at `url`; returns the name
    it is served as (one per directory: a second load of it is refused as a duplicate)."""
    path = str(Path(adapter).resolve())
    name = f"adapter-{hashlib.sha256(path.encode()).hexdigest()[:10]}"
    async with httpx.AsyncClient(base_url=url, timeout=300) as http:
        response = await http.post(
            "/load_lora_adapter", json={"lora_name": name, "lora_path": path}
        )
    if response.status_code != 200 and "already been loaded" not in response.text:
        raise ServerError(f"vLLM refused the adapter {adapter}: {response.text[:300]}")
    return name


def stop_servers() -> None:
    """Stop every server this process started (SIGTERM, then SIGKILL after 10 s)."""
    while _servers:
        _, server = _servers.popitem()
        server.child.stop(10)
