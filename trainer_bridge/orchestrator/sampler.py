"""The inference backend as the orchestrator drives it: gated calls, verified policies, rebuilds.

Every model call goes through a `GuardedClient` (a hang bound, failures labelled
`sampler_error`, the policy gate, the served version checked). A policy is loaded with every
call held and is used only once the backend's logprobs of the probe match the trainer's. An
unhealthy backend is rebuilt on the current policy, at most `MAX_SAMPLER_RESTARTS` times in
`SAMPLER_RESTART_WINDOW_S`.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from prime_env.clients.base import ChatResponse, Message, SamplingArgs, TokenClient, ToolSpec
from prime_env.errors import ModelError
from trainer_bridge.inference.base import BackendFactory, InferenceBackend
from trainer_bridge.orchestrator.errors import TrainingStopped
from trainer_bridge.protocol.policy import PolicyError, Probe, read_policy
from trainer_bridge.protocol.run_dir import RunDir

SAMPLER_ERROR = "sampler_error"
MAX_SAMPLER_RESTARTS = 3
SAMPLER_RESTART_WINDOW_S = 600.0

PROBE_TOLERANCE = {"float32": 1e-4, "bfloat16": 1e-2}
"""The probe's default tolerance by the precision the backend serves in: above the gap between
trainer and sampler on the same weights, below what one step moves the probe (docs/training.md
has the measurements). A backend that does not say is taken as bf16."""


class PolicyGate:
    """Holds every model call while a new policy is loaded and probed.

    Gating dispatch alone is not enough: a multi-turn rollout started on policy N-1 makes its
    later calls while N is being loaded, and a backend serves each call with the newest policy
    it has (vLLM tags the request `policy-N`; the torch sampler generates with the swapped
    weights). So each call waits while the gate is shut, and a load first waits for the calls
    already made (they finish on N-1): no token is sampled by N before N's probe has passed.
    A failed probe leaves the gate shut; the run is stopping."""

    def __init__(self) -> None:
        self._open = asyncio.Event()
        self._open.set()
        self._idle = asyncio.Event()
        self._idle.set()
        self._calls = 0

    @asynccontextmanager
    async def call(self) -> AsyncIterator[None]:
        await self._open.wait()
        self._calls += 1
        self._idle.clear()
        try:
            yield
        finally:
            self._calls -= 1
            if not self._calls:
                self._idle.set()

    @asynccontextmanager
    async def shut(self, *, drain: bool) -> AsyncIterator[None]:
        """Shut for the body (a load and its probe), after the calls in flight if `drain`;
        reopened only if the body succeeds."""
        self._open.clear()
        if drain:
            await self._idle.wait()
        yield
        self._open.set()


class GuardedClient:
    """The backend's client with a hang bound, the sampler failures labelled `sampler_error`
    (recorded, never scored as 0), each call held by the policy gate, and each response's
    policy version checked against the versions the orchestrator published."""

    def __init__(
        self,
        inner: Any,
        timeout_s: float,
        check_version: Callable[[int], None],
        gate: PolicyGate,
    ) -> None:
        self.inner = inner
        self.model = inner.model
        self.provider = inner.provider
        self.base_url = inner.base_url
        self.timeout_s = timeout_s
        self.check_version = check_version
        self.gate = gate

    async def chat(
        self,
        messages: list[Message],
        *,
        tools: list[ToolSpec] | None = None,
        sampling: SamplingArgs | None = None,
    ) -> ChatResponse:
        return await self._guarded(
            lambda: self.inner.chat(messages, tools=tools, sampling=sampling)
        )

    def bridge(
        self, completion_ids: list[int], messages: list[Message], tools: list[ToolSpec] | None
    ) -> list[int] | None:
        """The inner client's token bridge (prime_env.trace_graph), None if it has none."""
        if not isinstance(self.inner, TokenClient):
            return None
        return self.inner.bridge(completion_ids, messages, tools)

    async def chat_ids(
        self,
        prompt_ids: list[int],
        messages: list[Message],
        *,
        tools: list[ToolSpec] | None = None,
        sampling: SamplingArgs | None = None,
    ) -> ChatResponse:
        return await self._guarded(
            lambda: self.inner.chat_ids(prompt_ids, messages, tools=tools, sampling=sampling)
        )

    async def _guarded(self, call: Callable[[], Awaitable[ChatResponse]]) -> ChatResponse:
        try:
            async with self.gate.call(), asyncio.timeout(self.timeout_s):  # no task per call
                response: ChatResponse = await call()
        except TimeoutError:
            raise ModelError(
                SAMPLER_ERROR, f"no response in {self.timeout_s:g} s (hung sampler)"
            ) from None
        except ModelError as exc:
            raise ModelError(SAMPLER_ERROR, f"{exc.error_type}: {exc.message}") from exc
        except Exception as exc:
            raise ModelError(SAMPLER_ERROR, f"{type(exc).__name__}: {exc}") from exc
        if response.policy_version is not None:
            self.check_version(response.policy_version)
        return response

    async def aclose(self) -> None:
        """The backend owns the inner client's resources."""


class Sampler:
    """One backend at a time, the policies published to it, and its restarts.

    `fail` is the orchestrator's: a stale policy served or too many restarts stop the run.
    `counters` (checkpointed with the run) count probe checks and sampler restarts."""

    def __init__(
        self,
        run: RunDir,
        make_backend: BackendFactory,
        *,
        timeout_s: float,
        probe_tolerance: float | None,
        counters: Counter[str],
        fail: Callable[[BaseException], None],
        log: Callable[[str], None],
    ) -> None:
        self.run = run
        self.make_backend = make_backend
        self.timeout_s = timeout_s
        self.tolerance_override = probe_tolerance
        self.counters = counters
        self.fail = fail
        self.log = log
        self.backend: InferenceBackend | None = None
        self.version = 0
        """The newest policy published and probed."""
        self.published: set[int] = set()
        self.gate = PolicyGate()
        self.probe_gaps: dict[int, float] = {}
        self.restarts: list[float] = []
        self.rebuilding: asyncio.Lock = asyncio.Lock()

    async def start(self) -> None:
        self.backend = await self.make_backend()

    def set_threads(self, threads: int) -> None:
        """Threads for a backend that samples on this machine's cores (the torch one)."""
        setter = getattr(self.backend, "set_threads", None)
        if setter is not None:
            setter(threads)

    def client(self) -> GuardedClient:
        assert self.backend is not None
        return GuardedClient(self.backend.client(), self.timeout_s, self.check_version, self.gate)

    def check_version(self, version: int) -> None:
        if version not in self.published:
            self.fail(
                TrainingStopped(
                    f"the backend answered with policy {version}, which is not loaded "
                    f"(published: {sorted(self.published)}); stopping before it is trained on"
                )
            )
            raise ModelError(SAMPLER_ERROR, f"response from unloaded policy {version}")

    async def publish(self, version: int, *, drain: bool = True) -> None:
        """Load policy `version` (broadcasts/step_N) into the backend and verify it with the probe,
        with every model call held meanwhile (PolicyGate; `drain=False` for a rebuilt backend:
        the calls still in flight went to the old one).

        Version 0 is the base model the backend starts with: it is only probed (the trainer
        broadcasts it too), which checks at step 0 that sampler and trainer compute the same."""
        assert self.backend is not None
        try:
            ref, probe = read_policy(self.run.broadcast(version))
        except PolicyError as exc:
            raise TrainingStopped(str(exc)) from exc
        if ref.version != version:
            raise TrainingStopped(f"{ref.path} holds policy {ref.version}, expected {version}")
        async with self.gate.shut(drain=drain):
            if version > 0:
                try:
                    await self.backend.publish(ref)
                except Exception as exc:
                    raise TrainingStopped(f"the backend refused policy {version}: {exc}") from exc
            self.published.add(version)
            await self.probe(version, probe)
        self.version = version

    async def probe(self, version: int, probe: Probe) -> None:
        """Dispatch nothing on `version` until the backend's logprobs of the probe match the
        trainer's within tolerance: a backend that ignored the load fails here, not later."""
        assert self.backend is not None
        try:
            got = await self.backend.score(version, probe.token_ids)
        except Exception as exc:
            raise TrainingStopped(f"probe of policy {version} failed: {exc}") from exc
        if len(got) != len(probe.logprobs):
            raise TrainingStopped(
                f"probe of policy {version}: the backend scored {len(got)} tokens, the trainer "
                f"{len(probe.logprobs)}"
            )
        gap = max((abs(a - b) for a, b in zip(got, probe.logprobs)), default=0.0)
        self.counters["probe_checks"] += 1
        self.probe_gaps[version] = gap
        tolerance = self.probe_tolerance()
        if gap > tolerance:
            self.published.discard(version)
            raise TrainingStopped(
                f"probe of policy {version} failed: the backend's logprobs differ from the "
                f"trainer's by up to {gap:.3g} (tolerance {tolerance:g}); the "
                "backend is not serving the weights the trainer broadcast"
            )

    def probe_tolerance(self) -> float:
        """`orchestrator.probe_tolerance`, else the backend's own (one whose kernels differ
        from the trainer's says so), else PROBE_TOLERANCE for the backend's precision."""
        if self.tolerance_override is not None:
            return self.tolerance_override
        own = getattr(self.backend, "probe_tolerance", None)
        if own is not None:
            return float(own)
        dtype = getattr(self.backend, "dtype", "bfloat16")
        return PROBE_TOLERANCE.get(str(dtype), PROBE_TOLERANCE["bfloat16"])

    async def rebuild(self, reason: str) -> None:
        """Replace an unhealthy backend and publish the current policy to the new one (a
        healthy one is kept: the failure was a single call's)."""
        async with self.rebuilding:
            assert self.backend is not None
            if await self.backend.health():
                return
            now = time.monotonic()
            self.restarts = [t for t in self.restarts if now - t < SAMPLER_RESTART_WINDOW_S]
            self.restarts.append(now)
            self.counters["sampler_restarts"] += 1
            if len(self.restarts) >= MAX_SAMPLER_RESTARTS:
                self.fail(
                    TrainingStopped(
                        f"the sampler failed {len(self.restarts)} times in "
                        f"{SAMPLER_RESTART_WINDOW_S / 60:g} min (last: {reason}); stopping. "
                        f"Resume with: prime train resume {self.run.root}"
                    )
                )
                return
            self.log(f"sampler unhealthy ({reason}); rebuilding it on policy {self.version}")
            old = self.backend
            try:
                await asyncio.wait_for(old.close(), 30)
            except Exception:  # noqa: BLE001, S110 - the old sampler is abandoned either way
                pass
            self.backend = await self.make_backend()
            self.published = set()
            await self.publish(self.version, drain=False)

    async def close(self) -> None:
        if self.backend is not None:
            try:
                await asyncio.wait_for(self.backend.close(), 5)
            except Exception:  # noqa: BLE001, S110 - shutting down; the child processes go next
                pass
