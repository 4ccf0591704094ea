"""The orchestrator: async rollouts in groups, batches for the trainer, policies back in.

One event loop runs everything. Groups (`prime_env.run_rollouts(env, client, tasks=[t],
r=group_size)`: harnesses, tools, sandboxes and rubrics stay prime_env's) are dispatched up to
`max_inflight` at once; each finished group is screened (error records never batched, ≥2
scored members, zero-variance groups dropped), turned into token-exact samples with
advantages, and queued. A batch is written once the queue holds `batch_size` rollouts; the
trainer child turns batch n into policy n+1, which is loaded into the backend and checked with
the probe before anything is dispatched on it.

The async bound, in rollouts: the dispatcher keeps enough work in flight for the batches up to
`version + max_async_level`, so with A=0 it samples exactly one batch and then waits for the
policy trained on it (synchronous, same code), and with A=1 it samples batch n+1 while the
trainer trains on batch n. At assembly a group older than `n - max_off_policy_steps` is dropped.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from prime_env.clients.base import ChatResponse, Message, SamplingArgs, ToolSpec
from prime_env.environment import Environment
from prime_env.errors import ModelError
from prime_env.record import RolloutRecord
from prime_env.runner import run_rollouts
from prime_env.tasks import Task
from trainer_bridge import checkpoints
from trainer_bridge.advantages import group_advantages
from trainer_bridge.backends.base import InferenceBackend
from trainer_bridge.config import ConfigError, TrainConfig
from trainer_bridge.metrics import Monitor, cpu_seconds, mean, peak_rss_mb
from trainer_bridge.policy import PolicyError, Probe, read_policy
from trainer_bridge.run_dir import RunDir
from trainer_bridge.samples import SampleError, TrainSample, samples_from_record, write_batch
from trainer_bridge.stable import is_stable
from trainer_bridge.supervisor import Supervisor

SAMPLER_ERROR = "sampler_error"
UNAVAILABLE_SUFFIX = "_unavailable"
"""Error types that say a service the env needs cannot run here at all (`sandbox_unavailable`:
no Docker daemon or image; an env's own `InfraError("…_unavailable", …)`), as opposed to one
failure of it. The sampler's failures are `sampler_error` and have their own rebuild rule."""
MAX_SAMPLER_RESTARTS = 3
SAMPLER_RESTART_WINDOW_S = 600.0
POLL_S = 0.1
TRAINER_METRICS = "trainer_metrics.jsonl"
DROUGHT_WARNING_GROUPS = 10
"""Batches' worth of consecutive zero-variance groups before the run says so."""

PROBE_TOLERANCE = {"float32": 1e-4, "bfloat16": 1e-2}
"""The probe's default tolerance by the precision the backend serves in. fp32 (the torch
backend on CPU): trainer and sampler compute the same function, measured gap 0.0 (SmolLM2 and
the tiny model, batch and thread count varied) and ≤ 1.5e-5 on sampled tokens at step 0, while
one step of the tiny model moves the probe by as little as 9.7e-3, which 1e-2 would take for
"unchanged". bf16 (vLLM, CUDA): two bf16 implementations differ far more (on CPU bf16 vs fp32
of the same weights: max 0.30, mean 0.046), not yet measured on a GPU; 1e-2 stays until
scripts/gpu_check_train.py says otherwise. A backend that does not say is taken as bf16."""

BackendFactory = Callable[[], Awaitable[InferenceBackend]]
EvalHook = Callable[[int, InferenceBackend], Awaitable[dict[str, float]]]


class TrainingStopped(RuntimeError):
    """The run cannot continue safely (probe failed, stale policy served, sampler keeps
    failing); the message says why. Checkpoints written so far stay resumable."""


# ------------------------------------------------------------------ rewards


def reward_weights(env: Environment, overrides: dict[str, float]) -> dict[str, float]:
    """The env's rubric weights by name with `orchestrator.reward.weights` applied; an unknown
    name is a config error (before any model loads)."""
    weights = {f.name: f.weight for f in env.rubric.funcs}
    unknown = sorted(set(overrides) - set(weights))
    if unknown:
        raise ConfigError(
            f"orchestrator.reward.weights names {', '.join(map(repr, unknown))}, which "
            f"{env.id} does not have; its rewards and metrics are {sorted(weights)}"
        )
    return weights | overrides


def training_reward(record: RolloutRecord, weights: dict[str, float]) -> float:
    """Σ weight × score over the record's rewards and metrics (metrics weigh 0 unless re-weighted)."""
    scores = {**record.metrics, **record.rewards}
    return float(sum(weights.get(name, 0.0) * value for name, value in scores.items()))


# ------------------------------------------------------------------ the sampler's client


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
        try:
            async with self.gate.call(), asyncio.timeout(self.timeout_s):  # no task per call
                response: ChatResponse = await self.inner.chat(
                    messages, tools=tools, sampling=sampling
                )
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


# ------------------------------------------------------------------ groups


@dataclass
class Group:
    """One task's rollouts, screened: `samples` is empty when the group was dropped."""

    key: str
    dispatch_version: int
    records: list[RolloutRecord]
    order: int = 0
    """Dispatch number: batches take groups in this order, never in completion order."""
    samples: list[TrainSample] = field(default_factory=list)
    rollouts: int = 0
    version: int = 0
    dropped: str | None = None


@dataclass
class StepStats:
    """What one step's metrics line says about sampling (the trainer adds its half)."""

    started: float = field(default_factory=time.monotonic)
    records: list[RolloutRecord] = field(default_factory=list)
    drops: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    train_rewards: list[float] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    samples: int = 0
    loss_tokens: int = 0
    wait_policy_s: float = 0.0


class Orchestrator:
    def __init__(
        self,
        config: TrainConfig,
        run: RunDir,
        env: Environment,
        make_backend: BackendFactory,
        supervisor: Supervisor,
        monitor: Monitor,
        *,
        evaluate: EvalHook | None = None,
        resume: checkpoints.OrchestratorState | None = None,
        log: Callable[[str], None] = print,
    ) -> None:
        self.config = config
        self.oc = config.orchestrator
        self.run = run
        self.env = env
        self.make_backend = make_backend
        self.supervisor = supervisor
        self.monitor = monitor
        self.evaluate = evaluate
        self.log = log
        self.weights = reward_weights(env, self.oc.reward.weights)
        self.tasks: list[Task] = list(env.tasks)
        if not self.tasks:
            raise ConfigError(f"{env.id} has an empty train split: nothing to train on")
        self.group_size = self.oc.rollouts_per_example
        self.max_inflight = self.oc.max_inflight or 2 * self.oc.groups_per_batch
        self.sampling = SamplingArgs(
            max_tokens=self.oc.sampling.max_tokens,
            temperature=self.oc.sampling.temperature,
            top_p=1.0,
            stop=self.oc.sampling.stop,
            logprobs=True,
        )
        self.step = resume.step if resume else 0
        self.version = resume.policy_version if resume else 0
        self.cursor = resume.task_cursor if resume else 0
        self.rng = (
            checkpoints.rng_from_json(resume.rng_state) if resume else random.Random(config.seed)
        )
        self.counters: Counter[str] = Counter(resume.counters if resume else {})
        self.digest = config.digest()
        self.published: set[int] = set()
        self.gate = PolicyGate()
        self.probe_gaps: dict[int, float] = {}
        self.ready: list[Group] = []
        self.inflight: dict[str, asyncio.Task[None]] = {}
        self.stats = StepStats()
        self.pending_stats: dict[int, StepStats] = {}
        self.changed = asyncio.Event()
        self.backend: InferenceBackend | None = None
        self.restarts: list[float] = []
        self.rebuilding: asyncio.Lock = asyncio.Lock()
        self.fatal: BaseException | None = None
        self.dispatched = 0
        self.drought = 0
        self.started = time.monotonic()
        self.cpu_started = cpu_seconds()

    # --------------------------------------------------------------- policy versions

    def _check_version(self, version: int) -> None:
        if version not in self.published:
            self._fail(
                TrainingStopped(
                    f"the backend answered with policy {version}, which is not loaded "
                    f"(published: {sorted(self.published)}); stopping before it is trained on"
                )
            )
            raise ModelError(SAMPLER_ERROR, f"response from unloaded policy {version}")

    def _fail(self, exc: BaseException) -> None:
        if self.fatal is None:
            self.fatal = exc
        self.changed.set()

    async def _publish(self, version: int, *, drain: bool = True) -> None:
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
            await self._probe(version, probe)

    async def _wait_broadcast(self, version: int, watcher: asyncio.Task[None]) -> None:
        while not is_stable(self.run.broadcast(version)):
            if watcher.done():
                watcher.result()  # raises ChildDied
            await asyncio.sleep(POLL_S)

    async def _probe(self, version: int, probe: Probe) -> None:
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
        """`orchestrator.probe_tolerance`, else PROBE_TOLERANCE for the backend's precision."""
        if self.oc.probe_tolerance is not None:
            return self.oc.probe_tolerance
        dtype = getattr(self.backend, "dtype", "bfloat16")
        return PROBE_TOLERANCE.get(str(dtype), PROBE_TOLERANCE["bfloat16"])

    # --------------------------------------------------------------- sampler health

    async def _rebuild_sampler(self, reason: str) -> None:
        async with self.rebuilding:
            assert self.backend is not None
            if await self.backend.health():
                return
            now = time.monotonic()
            self.restarts = [t for t in self.restarts if now - t < SAMPLER_RESTART_WINDOW_S]
            self.restarts.append(now)
            self.counters["sampler_restarts"] += 1
            if len(self.restarts) >= MAX_SAMPLER_RESTARTS:
                self._fail(
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
            await self._publish(self.version, drain=False)

    # --------------------------------------------------------------- groups

    def _next_task(self) -> tuple[int, Task]:
        epoch, index = divmod(self.cursor, len(self.tasks))
        order = list(range(len(self.tasks)))
        random.Random(f"{self.config.seed}-{epoch}").shuffle(order)
        self.cursor += 1
        return self.cursor - 1, self.tasks[order[index]]

    async def _run_group(
        self, key: str, order: int, task: Task, version: int, seed: int | None
    ) -> None:
        assert self.backend is not None
        client = GuardedClient(
            self.backend.client(), self.oc.sampler_timeout_s, self._check_version, self.gate
        )
        sampling = replace(self.sampling, seed=seed) if seed is not None else self.sampling
        try:
            records = await run_rollouts(
                self.env,
                client,
                tasks=[task],
                r=self.group_size,
                concurrency=self.group_size,
                sampling=sampling,
                run_id=self.run.run_id,
            )
            group = self._screen(key, version, records, order)
            if any(r.error is not None and r.error.type == SAMPLER_ERROR for r in records):
                reason = next(
                    r.error.message for r in records if r.error and r.error.type == SAMPLER_ERROR
                )
                await self._rebuild_sampler(reason)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # noqa: BLE001 - surfaced by the main loop
            self._fail(exc)
            return
        finally:
            self.inflight.pop(key, None)
        self.ready.append(group)
        self._note_drought(group)
        self._stop_if_unavailable(records)
        self.changed.set()

    def _stop_if_unavailable(self, records: list[RolloutRecord]) -> None:
        """Stop at the first rollout whose error says a service the env needs cannot run here.
        Every later rollout that needs it would fail the same way, so the batches would hold
        only the rollouts that never reached it (python-code: the answers without code, all
        scored 0): training on zeros. The errors stay records, never scores."""
        failed = [
            r.error
            for r in records
            if r.error is not None and r.error.type.endswith(UNAVAILABLE_SUFFIX)
        ]
        if failed:
            self._fail(
                TrainingStopped(
                    f"{failed[0].type}: {failed[0].message}. Every rollout that needs it would "
                    "fail the same way and the batches would hold only those that never "
                    "reached it, so the run stops instead of training on them; fix it and "
                    "resume"
                )
            )

    def _note_drought(self, group: Group) -> None:
        """Say so (once) when many groups in a row carry no signal: with every reward equal
        (a model that never solves the task) the run would otherwise sample silently forever."""
        if group.dropped != "zero_variance":
            self.drought = 0
            return
        self.drought += 1
        if self.drought == DROUGHT_WARNING_GROUPS * self.oc.groups_per_batch:
            self.log(
                f"{self.drought} groups in a row had equal rewards for every rollout, so "
                "there is nothing to learn from yet; check the env's reward (or re-weight a "
                "metric with orchestrator.reward.weights), or set "
                "orchestrator.filter_zero_advantages = false"
            )

    def _screen(
        self, key: str, version: int, records: list[RolloutRecord], order: int = 0
    ) -> Group:
        for record in records:
            if record.policy_version is None:
                record.policy_version = version
        group = Group(key, version, records, order)
        scored = [r for r in records if r.error is None and r.reward is not None]
        group.version = min((r.policy_version or version for r in records), default=version)
        if len(scored) < 2:
            group.dropped = "group_too_small"
            return group
        rewards = [training_reward(r, self.weights) for r in scored]
        advantages = group_advantages(rewards, std_norm=self.oc.advantage.std_norm)
        if advantages is None:
            if self.oc.filter_zero_advantages:
                group.dropped = "zero_variance"
                return group
            advantages = [0.0] * len(scored)
        bad: Counter[str] = Counter()
        for record, advantage in zip(scored, advantages):
            try:
                group.samples += samples_from_record(
                    record,
                    advantage=advantage,
                    temperature=self.oc.sampling.temperature,
                    group=key,
                )
                group.rollouts += 1
            except SampleError as exc:
                bad[exc.error_type] += 1
        if bad:
            group.dropped = None if group.rollouts >= 2 else next(iter(bad))
            for kind, count in bad.items():
                self.stats.errors[kind] += count
            if group.rollouts < 2:
                group.samples = []
        return group

    def _usable_rollouts(self) -> int:
        return sum(g.rollouts for g in self.ready if g.dropped is None)

    def _dispatch(self) -> None:
        """Start groups while the async bound and max_inflight allow (see the module docstring)."""
        horizon = min(self.version + self.oc.max_async_level, self.config.max_steps - 1)
        if horizon < self.step:
            return
        wanted = (horizon - self.step + 1) * self.oc.batch_size
        have = self._usable_rollouts() + len(self.inflight) * self.group_size
        while have < wanted and len(self.inflight) < self.max_inflight:
            index, task = self._next_task()
            key = f"d{self.dispatched}-{task.id}"  # (dispatch, task): never merged by prompt
            self.dispatched += 1
            seed = self.config.seed * 1_000_003 + index if self.config.deterministic else None
            job = asyncio.create_task(
                self._run_group(key, self.dispatched - 1, task, self.version, seed)
            )
            self.inflight[key] = job
            have += self.group_size

    # --------------------------------------------------------------- batches

    def _take_batch(self) -> list[Group] | None:
        """Groups for batch `self.step` (drops recorded) once they hold batch_size rollouts,
        oldest dispatch first: which groups finish first is timing, and a batch must not depend
        on it (with --deterministic a resumed run repeats an uninterrupted one bit for bit)."""
        floor = self.step - self.oc.max_off_policy_steps
        kept: list[Group] = []
        for group in sorted(self.ready, key=lambda g: g.order):
            if group.dropped is None and group.version < floor:
                group.dropped = "stale"
            if group.dropped is not None:
                self._account(group)
            else:
                kept.append(group)
        self.ready = kept
        if self._usable_rollouts() < self.oc.batch_size:
            return None
        chosen: list[Group] = []
        total = 0
        while total < self.oc.batch_size:
            group = self.ready.pop(0)
            chosen.append(group)
            total += group.rollouts
        return chosen

    def _account(self, group: Group) -> None:
        self.stats.records += group.records
        for record in group.records:
            if record.error is not None:
                self.stats.errors[record.error.type] += 1
        if group.dropped is not None:
            self.stats.drops[group.dropped] += 1

    def _write_batch(self, groups: list[Group]) -> None:
        samples: list[TrainSample] = []
        for group in groups:
            self._account(group)
            samples += group.samples
            self.stats.versions += [group.version] * group.rollouts
            self.stats.train_rewards += [
                training_reward(r, self.weights) for r in group.records if r.error is None
            ]
        self.stats.samples = len(samples)
        self.stats.loss_tokens = sum(s.num_loss_tokens for s in samples)
        with self.run.rollouts(self.step).open("w") as fh:
            for record in self.stats.records:
                fh.write(record.to_json() + "\n")
        write_batch(
            self.run.root,
            self.step,
            samples,
            {
                "groups": [g.key for g in groups],
                "policy_versions": sorted(set(self.stats.versions)),
            },
        )
        self.pending_stats[self.step] = self.stats
        self.stats = StepStats()
        self.step += 1

    def _log_unfinished_steps(self, reason: str) -> None:
        """A run that stops mid-step still says what its unfinished steps saw: a metrics line
        each (`errors/*`, `drops/*`, `stopped`; no trainer half) for the batches written but
        not yet trained and for the step being sampled, whose records (errors included) go to
        rollouts/step_N.jsonl. A resume discards all of it and samples those steps again."""
        for group in self.ready:
            self._account(group)
        self.ready = []
        if self.stats.records:
            with self.run.rollouts(self.step).open("w") as fh:
                for record in self.stats.records:
                    fh.write(record.to_json() + "\n")
            self.pending_stats[self.step] = self.stats
            self.stats = StepStats()
        for step in sorted(self.pending_stats):
            row = self._metrics_row(step, self.pending_stats.pop(step), {}, {})
            row["stopped"] = reason
            self.monitor.log(row)

    # --------------------------------------------------------------- metrics

    def _metrics_row(
        self, step: int, stats: StepStats, eval_row: dict[str, float], trainer: dict[str, Any]
    ) -> dict[str, Any]:
        elapsed = time.monotonic() - stats.started
        scored = [r for r in stats.records if r.error is None]
        row: dict[str, Any] = {"step": step, "time": round(time.time(), 3)}
        row["reward/mean"] = mean(r.reward for r in scored if r.reward is not None)
        row["reward/train_mean"] = mean(stats.train_rewards)
        names = sorted({k for r in scored for k in (*r.rewards, *r.metrics)})
        for name in names:
            row[f"reward/{name}"] = mean(
                {**r.metrics, **r.rewards}[name]
                for r in scored
                if name in r.rewards or name in r.metrics
            )
        row["batch/samples"] = stats.samples
        row["batch/rollouts"] = len(stats.versions)
        row["batch/loss_tokens"] = stats.loss_tokens
        row["rollouts/total"] = len(stats.records)
        row["off_policy/mean"] = mean(float(step - v) for v in stats.versions)
        row["off_policy/max"] = max((step - v for v in stats.versions), default=None)
        for kind, count in stats.drops.items():
            row[f"drops/{kind}"] = count
        row["drops/total"] = sum(stats.drops.values())
        for kind, count in stats.errors.items():
            row[f"errors/{kind}"] = count
        row["errors/total"] = sum(stats.errors.values())
        completion = sum(r.usage.completion_tokens for r in stats.records)
        row["perf/tokens_sampled"] = completion
        row["perf/tokens_per_s"] = round(completion / max(elapsed, 1e-9), 2)
        row["time/step_s"] = round(elapsed, 3)
        row["time/wait_policy_s"] = round(stats.wait_policy_s, 3)
        row["time/elapsed_s"] = round(time.monotonic() - self.started, 3)
        row["perf/cpu_s_orchestrator"] = round(cpu_seconds() - self.cpu_started, 2)
        row["mem/orchestrator_peak_rss_mb"] = peak_rss_mb()
        row["sampler/restarts"] = self.counters["sampler_restarts"]
        if step + 1 in self.probe_gaps:
            row["probe/max_abs_diff"] = self.probe_gaps[step + 1]
        for key, value in trainer.items():
            if key != "step":
                row[f"trainer/{key}"] = value
        row.update(eval_row)
        return row

    async def _trainer_metrics(self, step: int) -> dict[str, Any]:
        """The trainer's line for `step` (it writes it just after the broadcast; wait briefly)."""
        path = self.run.root / TRAINER_METRICS
        deadline = time.monotonic() + 10
        while True:
            if path.is_file():
                for line in reversed(path.read_text().splitlines()):
                    try:
                        data = json.loads(line)
                    except ValueError:
                        continue
                    if data.get("step") == step:
                        return dict(data)
            if time.monotonic() > deadline:
                return {}
            self.supervisor.check()  # a trainer that died after the broadcast stops the run now
            await asyncio.sleep(0.05)

    # --------------------------------------------------------------- the run

    async def _advance_policy(self) -> bool:
        """Load the next broadcast if the trainer finished it; True if the version advanced."""
        nxt = self.version + 1
        if nxt > self.config.max_steps or not is_stable(self.run.broadcast(nxt)):
            return False
        async with self.rebuilding:  # never publish into a sampler that is being replaced
            await self._publish(nxt)
        self.version = nxt
        stats = self.pending_stats.pop(nxt - 1, None) or StepStats()
        eval_row = await self._maybe_eval(nxt)
        trainer = await self._trainer_metrics(nxt - 1)
        self.monitor.log(self._metrics_row(nxt - 1, stats, eval_row, trainer))
        self._checkpoint(nxt)
        return True

    async def _maybe_eval(self, version: int) -> dict[str, float]:
        if self.evaluate is None:
            return {}
        ev = self.oc.eval
        due = (version == self.config.max_steps and ev.at_end) or (
            ev.interval and version % ev.interval == 0
        )
        if not due:
            return {}
        assert self.backend is not None
        return await self.evaluate(version, self.backend)

    def _checkpoint(self, version: int) -> None:
        interval = self.config.ckpt.interval
        if version != self.config.max_steps and not (interval and version % interval == 0):
            return
        # The orchestrator state at `version`: batches < version trained, the cursor past every
        # task dispatched so far (in-flight groups are not replayed after a resume).
        state = checkpoints.OrchestratorState(
            step=version,
            task_cursor=self.cursor,
            rng_state=checkpoints.rng_to_json(self.rng),
            policy_version=version,
            config_digest=self.digest,
            counters=dict(self.counters),
        )
        checkpoints.save(self.run, state, self.config.ckpt.keep_last)

    async def run_training(self) -> None:
        """Sample, batch and publish until policy `max_steps` is loaded (and evaluated)."""
        watcher = asyncio.create_task(self.supervisor.watch())
        try:
            self.backend = await self.make_backend()
            await self._wait_broadcast(self.version, watcher)
            await self._publish(self.version)
            if self.version == 0 and self.evaluate is not None and self.oc.eval.at_start:
                await self.evaluate(0, self.backend)
            while self.version < self.config.max_steps:
                if self.fatal is not None:
                    self._log_unfinished_steps(str(self.fatal))
                    raise self.fatal
                if watcher.done():
                    watcher.result()  # raises ChildDied
                for step in list(self.pending_stats):
                    checkpoints.complete(self.run, step + 1)
                if await self._advance_policy():
                    continue
                if self.step < self.config.max_steps:
                    groups = self._take_batch()
                    if groups is not None:
                        self._write_batch(groups)
                        continue
                    self._dispatch()
                    if not self.inflight and self.step > self.version + self.oc.max_async_level:
                        self.stats.wait_policy_s += POLL_S
                self.changed.clear()
                try:
                    await asyncio.wait_for(self.changed.wait(), POLL_S)
                except TimeoutError:
                    pass
            for step in range(self.config.max_steps + 1):
                checkpoints.complete(self.run, step)
        finally:
            watcher.cancel()
            await self._cancel_inflight()

    async def _cancel_inflight(self) -> None:
        jobs = list(self.inflight.values())
        for job in jobs:
            job.cancel()
        if jobs:
            await asyncio.wait(jobs, timeout=5)
        if self.backend is not None:
            try:
                await asyncio.wait_for(self.backend.close(), 5)
            except Exception:  # noqa: BLE001, S110 - shutting down; the child processes go next
                pass


def trainer_command(run: RunDir, python: str, resume_step: int = 0) -> list[str]:
    return [
        python,
        "-m",
        "trainer_bridge.trainer",
        "--run-dir",
        str(run.root),
        "--resume-step",
        str(resume_step),
    ]
