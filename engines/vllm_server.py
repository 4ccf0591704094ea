"""A vLLM server of ours: what it serves, its command line and environment, when it is ready.

It serves a Hugging Face model directory (served_models.py). The flags make it token-exact for training: token ids in place of
token strings (`--return-tokens-as-token-ids`), the logprob of each sampled token under the
distribution it was sampled from (`--logprobs-mode processed_logprobs`; the Lab asks for the
model's own, `raw_logprobs`, as its torch engine reports them), LoRA adapters loaded at run
time (`--enable-lora`, VLLM_ALLOW_RUNTIME_LORA_UPDATING). On CPU the KV cache gets a
fixed size (vLLM would otherwise reserve a fraction of the machine's memory, 92% by default,
and refuse to start on a machine with less free), weights are float32 (the trainer's) and the
model runs eager (no inductor compile at start).

Every Python process of the server dies with its parent (child_site/sitecustomize.py): vLLM's
engine and worker processes would otherwise outlive a server killed by SIGKILL.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import httpx

from engines.install import SERVER_MODULE, Engine, cuda_present
from engines.lifetime import PARENT_PID_ENV

LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
"""The ranks `--max-lora-rank` accepts (vLLM 0.32)."""
CPU_KV_CACHE_BYTES = 2 << 30
"""KV cache on CPU: ~46k tokens of SmolLM2-135M in float32 (30 layers x 3 KV heads x 64)."""
START_TIMEOUT_S = 900.0
"""A start takes 1-3 minutes on two quiet cores (docs/benchmarks.md); a loaded machine more."""
CHILD_SITE = Path(__file__).resolve().parent / "child_site"


class ServerError(RuntimeError):
    """The server cannot be started or did not become ready; the message says why."""


def lora_rank_flag(rank: int) -> int:
    """The smallest `--max-lora-rank` vLLM accepts that holds `rank`."""
    for allowed in LORA_RANKS:
        if allowed >= rank:
            return allowed
    raise ServerError(f"LoRA rank {rank} is above vLLM's largest ({LORA_RANKS[-1]})")


def free_port() -> int:
    """A loopback port nobody listens on now (the server binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class ServerSpec:
    """One server: the model directory it loads, the name requests use, where it listens."""

    model: str
    served_name: str
    url: str  # http://HOST:PORT/v1
    dtype: str = "auto"  # auto: float32 on CPU, bfloat16 on CUDA
    lora_rank: int | None = None  # None: no LoRA (a full model)
    max_loras: int = 4
    max_cpu_loras: int | None = None  # adapters kept loaded in memory (None: vLLM's, max_loras)
    logprobs_mode: str = "processed_logprobs"
    gpu_memory_utilization: float = 0.5
    extra_args: Sequence[str] = field(default_factory=tuple)


def local_url(port: int | None = None) -> str:
    return f"http://127.0.0.1:{port or free_port()}/v1"


def server_argv(engine: Engine, spec: ServerSpec, *, cuda: bool | None = None) -> list[str]:
    """The server's command line: vLLM's OpenAI server module run by the engine's Python."""
    cuda = cuda_present() if cuda is None else cuda
    parsed = urlparse(spec.url)
    dtype = spec.dtype if spec.dtype != "auto" else ("bfloat16" if cuda else "float32")
    argv = [
        engine.python, "-m", SERVER_MODULE,
        "--model", spec.model,
        "--served-model-name", spec.served_name,
        "--host", parsed.hostname or "127.0.0.1",
        "--port", str(parsed.port or 8000),
        "--dtype", dtype,
        "--return-tokens-as-token-ids",
        "--logprobs-mode", spec.logprobs_mode,
        "--disable-uvicorn-access-log",
    ]  # fmt: skip
    if cuda:
        argv += ["--gpu-memory-utilization", str(spec.gpu_memory_utilization)]
    else:
        # eager: without LoRA vLLM-CPU compiles the model with inductor first, minutes of a
        # start on two cores (with LoRA it runs eager anyway: the same kernels either way)
        argv += ["--kv-cache-memory-bytes", str(CPU_KV_CACHE_BYTES), "--enforce-eager"]
    if spec.lora_rank is not None:
        argv += ["--enable-lora", "--max-lora-rank", str(lora_rank_flag(spec.lora_rank))]
        argv += ["--max-loras", str(spec.max_loras)]
        if spec.max_cpu_loras is not None:
            argv += ["--max-cpu-loras", str(spec.max_cpu_loras)]
    return argv + list(spec.extra_args)


def server_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The server's environment: runtime LoRA loading, and every process dying with its
    parent (PYTHONPATH puts child_site/sitecustomize.py first)."""
    env = dict(os.environ if base is None else base)
    env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] = "1"
    env["PRIME_DIE_WITH_PARENT"] = "1"
    env[PARENT_PID_ENV] = str(os.getpid())  # the server's parent: this process
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(CHILD_SITE), env.get("PYTHONPATH")) if p)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


async def wait_ready(
    url: str,
    timeout_s: float = START_TIMEOUT_S,
    check: Callable[[], None] | None = None,
    client: httpx.AsyncClient | None = None,
) -> None:
    """Wait until the server at `url` answers `GET /models`; `check` is called between polls
    (a supervisor's: a dead server stops the wait with its log)."""
    deadline = time.monotonic() + timeout_s
    own = client is None
    http = client or httpx.AsyncClient(timeout=10)
    try:
        while True:
            if check is not None:
                check()
            try:
                if (await http.get(url.rstrip("/") + "/models")).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise ServerError(f"the vLLM server at {url} was not ready after {timeout_s:g} s")
            await asyncio.sleep(1.0)
    finally:
        if own:
            await http.aclose()
