"""The `vllm` backend: N `vllm serve --enable-lora` servers, policies hot-loaded as LoRA adapters.

Control plane (the part that must never be wrong, and runs on CPU against fakes in tests):
- each policy N is loaded on *every* server as `policy-N` (`POST /v1/load_lora_adapter`)
  before `publish` returns, so nothing is dispatched on N until all servers have it; a refusal
  anywhere raises (the orchestrator stops the run);
- names are never reused (a same-name reload can reuse stale prefix-cache KV, vllm#42125);
- a name is unloaded (`POST /v1/unload_lora_adapter`) only when it is neither the newest nor
  used by any in-flight request (refcounts, not a time window: trl#7017);
- a group's client is pinned to one server (round-robin over servers by least in-flight use),
  and tells it its session in the request's `user` field for routers;
- responses are token-exact: the servers run with `--return-tokens-as-token-ids` and
  `--logprobs-mode processed_logprobs`, requests ask for `return_token_ids`, `top_k=-1`.
Data plane: prime_env's `OpenAIClient` (one per server), so retries and error classes are
the eval runner's.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import httpx

from prime_env.clients.base import ChatResponse, Message, SamplingArgs, ToolSpec
from prime_env.clients.openai_client import OpenAIClient
from prime_env.clients.retry import RetryPolicy
from prime_env.errors import ModelError
from trainer_bridge.protocol.policy import PolicyRef

BASE_VERSION = 0


class BackendError(RuntimeError):
    """A server refused a control-plane request (load, unload, score)."""


def lora_name(version: int) -> str:
    return f"policy-{version}"


class _Server:
    def __init__(self, url: str, model: str, policy: RetryPolicy) -> None:
        self.url = url.rstrip("/")
        self.admin = httpx.AsyncClient(base_url=self.url, timeout=120)
        self.openai = OpenAIClient(model, base_url=self.url, provider="vllm", policy=policy)
        self.inflight = 0  # requests in flight here


class VLLMBackend:
    """InferenceBackend over OpenAI-compatible vLLM servers with runtime LoRA loading."""

    def __init__(self, base_model: str, urls: list[str], *, lora: bool = True) -> None:
        if not urls:
            raise ValueError("the vllm backend needs at least one server url")
        if not lora:
            raise BackendError(
                "full fine-tuning on vLLM needs its weight-transfer API (NCCL), which this "
                "backend does not drive yet; use LoRA (model.lora) or the torch backend"
            )
        self.base_model = base_model
        policy = RetryPolicy(max_attempts=3, timeout_s=600)
        self.servers = [_Server(url, base_model, policy) for url in urls]
        self.version = BASE_VERSION
        self.loaded: set[int] = {BASE_VERSION}  # the base model is always served
        self.in_use: Counter[int] = Counter()
        self.unloaded: list[int] = []
        self._next_server = 0

    # --- readiness ---------------------------------------------------------------------
    async def wait_ready(self, timeout_s: float, check: Callable[[], None] | None = None) -> None:
        """Wait until every server answers `GET /models` (vLLM takes minutes to start);
        `check` is called between polls (ChildProcesses.check: a dead server stops the wait)."""
        deadline = time.monotonic() + timeout_s
        pending = list(self.servers)
        while pending:
            if check is not None:
                check()
            for server in list(pending):
                try:
                    response = await server.admin.get("/models")
                    if response.status_code == 200:
                        pending.remove(server)
                except httpx.HTTPError:
                    pass
            if pending and time.monotonic() > deadline:
                raise BackendError(
                    f"vLLM servers not ready after {timeout_s:g} s: "
                    + ", ".join(s.url for s in pending)
                )
            if pending:
                await asyncio.sleep(1.0)

    # --- InferenceBackend ----------------------------------------------------------------
    def client(self) -> _PinnedClient:
        count = len(self.servers)
        order = [self.servers[(self._next_server + i) % count] for i in range(count)]
        server = min(order, key=lambda s: s.inflight)  # least busy; ties round-robin
        self._next_server = (self.servers.index(server) + 1) % count
        return _PinnedClient(self, server)

    async def publish(self, policy: PolicyRef) -> None:
        if policy.kind != "lora":
            raise BackendError(f"policy {policy.version} is a full-weight broadcast; see __init__")
        if policy.version in self.loaded or policy.version in self.unloaded:
            raise BackendError(
                f"policy {policy.version} was already loaded: names are never reused"
            )
        name = lora_name(policy.version)
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
        model = self.base_model if version == BASE_VERSION else lora_name(version)
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
            lists.append(_prompt_logprobs(response.json(), token_ids))
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
        for server in self.servers:
            await server.openai.aclose()
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
            body = {"lora_name": lora_name(version)}
            for server in self.servers:
                response = await server.admin.post("/unload_lora_adapter", json=body)
                if response.status_code != 200:
                    raise BackendError(
                        f"{server.url} refused to unload {lora_name(version)}: {response.text[:200]}"
                    )


class _PinnedClient:
    """One group's client: every call goes to the same server, tagged with the newest policy."""

    provider = "vllm"

    def __init__(self, backend: VLLMBackend, server: _Server) -> None:
        self.backend = backend
        self.server = server
        self.model = backend.base_model
        self.base_url: str | None = server.url
        self.session = uuid.uuid4().hex[:12]

    async def chat(
        self,
        messages: list[Message],
        *,
        tools: list[ToolSpec] | None = None,
        sampling: SamplingArgs | None = None,
    ) -> ChatResponse:
        version = self.backend._acquire()
        model = self.backend.base_model if version == BASE_VERSION else lora_name(version)
        sampling = sampling or SamplingArgs()
        extra = {
            **sampling.extra,
            "model": model,
            "return_token_ids": True,
            "top_k": -1,
            "user": self.session,
        }
        self.server.inflight += 1
        try:
            response = await self.server.openai.chat(
                messages, tools=tools, sampling=replace(sampling, logprobs=True, extra=extra)
            )
        finally:
            self.server.inflight -= 1
            await self.backend._release(version)
        if response.completion_token_ids is None:
            raise ModelError(
                "missing_token_ids",
                f"{self.server.url} returned no token ids: start vllm with "
                "--return-tokens-as-token-ids",
            )
        return replace(response, policy_version=version)

    async def aclose(self) -> None:
        """The backend owns the server connections."""


def _prompt_logprobs(data: dict[str, Any], token_ids: list[int]) -> list[float]:
    """vLLM's `prompt_logprobs`: [None, {str(id): {"logprob": …}}, …] → logprob of each token."""
    entries = data["choices"][0].get("prompt_logprobs") or data.get("prompt_logprobs")
    if not entries or len(entries) != len(token_ids):
        raise BackendError("the server returned no prompt_logprobs for the probe")
    values = []
    for token, entry in zip(token_ids[1:], entries[1:]):
        item = (entry or {}).get(str(token))
        if item is None:
            raise BackendError(f"prompt_logprobs lack the probe token {token}")
        values.append(float(item["logprob"] if isinstance(item, dict) else item))
    return values
