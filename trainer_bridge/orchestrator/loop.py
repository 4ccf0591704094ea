"""The orchestrator: async rollouts in groups, batches for the trainer, policies back in.

One event loop runs everything. Groups (`prime_env.run_rollouts(env, client, tasks=[t],
r=group_size)`: harnesses, tools, sandboxes and rubrics stay prime_env's) are dispatched up to
`max_inflight` at once within the async bound (dispatch.py); each finished group is screened
and given samples with advantages (groups.py) and waits for a batch (batches.py). A batch is
written once they hold `batch_size` rollouts; the trainer child turns batch n into policy n+1,
which is loaded into the backend and checked with the probe (sampler.py) before anything is
dispatched on it. At assembly a group older than `n - max_off_policy_steps` is dropped.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from prime_env.clients.base import SamplingArgs
from prime_env.environment import Environment
from prime_env.record import RolloutRecord
from prime_env.runner import run_rollouts
from prime_env.tasks import Task
from trainer_bridge.checkpoints import layout, orchestrator_state
from trainer_bridge.config import ConfigError, TrainConfig
from trainer_bridge.inference.base import BackendFactory, InferenceBackend
from trainer_bridge.metrics import Monitor
from trainer_bridge.orchestrator.batches import Batches, StepStats
from trainer_bridge.orchestrator.dispatch import TaskOrder, rollouts_wanted
from trainer_bridge.orchestrator.groups import Screener
from trainer_bridge.orchestrator.health import Drought, unavailable_service
from trainer_bridge.orchestrator.rewards import reward_weights
from trainer_bridge.orchestrator.sampler import SAMPLER_ERROR, Sampler
from trainer_bridge.orchestrator.step_metrics import StepMetrics
from trainer_bridge.protocol.run_dir import RunDir
from trainer_bridge.protocol.stable import is_stable
from trainer_bridge.supervisor import Supervisor

POLL_S = 0.1

EvalHook = Callable[[int, InferenceBackend], Awaitable[dict[str, float]]]


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
        resume: orchestrator_state.OrchestratorState | None = None,
        log: Callable[[str], None] = print,
    ) -> None:
        self.config = config
        self.oc = config.orchestrator
        self.run = run
        self.env = env
        self.supervisor = supervisor
        self.monitor = monitor
        self.evaluate = evaluate
        self.log = log
        weights = reward_weights(env, self.oc.reward.weights)
        tasks: list[Task] = list(env.tasks)
        if not tasks:
            raise ConfigError(f"{env.id} has an empty train split: nothing to train on")
        self.tasks = TaskOrder(tasks, config.seed, resume.task_cursor if resume else 0)
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
        self.rng = (
            orchestrator_state.rng_from_json(resume.rng_state)
            if resume
            else random.Random(config.seed)
        )
        self.counters: Counter[str] = Counter(resume.counters if resume else {})
        self.digest = config.digest()
        self.screener = Screener(weights, self.oc)
        self.batches = Batches(run, self.oc.batch_size, self.oc.max_off_policy_steps, weights)
        self.sampler = Sampler(
            run,
            make_backend,
            timeout_s=self.oc.sampler_timeout_s,
            probe_tolerance=self.oc.probe_tolerance,
            counters=self.counters,
            fail=self._fail,
            log=log,
        )
        self.metrics = StepMetrics(run)
        self.drought = Drought(self.oc.groups_per_batch)
        self.inflight: dict[str, asyncio.Task[None]] = {}
        self.changed = asyncio.Event()
        self.fatal: BaseException | None = None
        self.dispatched = 0

    def _fail(self, exc: BaseException) -> None:
        if self.fatal is None:
            self.fatal = exc
        self.changed.set()

    # --------------------------------------------------------------- groups

    def _dispatch(self) -> None:
        """Start groups while the async bound and max_inflight allow (dispatch.py)."""
        wanted = rollouts_wanted(
            self.step,
            self.version,
            max_async_level=self.oc.max_async_level,
            max_steps=self.config.max_steps,
            batch_size=self.oc.batch_size,
        )
        have = self.batches.usable_rollouts() + len(self.inflight) * self.group_size
        while have < wanted and len(self.inflight) < self.max_inflight:
            index, task = self.tasks.next()
            key = f"d{self.dispatched}-{task.id}"  # (dispatch, task): never merged by prompt
            self.dispatched += 1
            seed = self.config.seed * 1_000_003 + index if self.config.deterministic else None
            job = asyncio.create_task(
                self._run_group(key, self.dispatched - 1, task, self.version, seed)
            )
            self.inflight[key] = job
            have += self.group_size

    async def _run_group(
        self, key: str, order: int, task: Task, version: int, seed: int | None
    ) -> None:
        client = self.sampler.client()
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
            group = self.screener.screen(key, version, records, order)
            self.batches.stats.errors.update(group.sample_errors)
            if any(r.error is not None and r.error.type == SAMPLER_ERROR for r in records):
                reason = next(
                    r.error.message for r in records if r.error and r.error.type == SAMPLER_ERROR
                )
                await self.sampler.rebuild(reason)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # noqa: BLE001 - surfaced by the main loop
            self._fail(exc)
            return
        finally:
            self.inflight.pop(key, None)
        self.batches.ready.append(group)
        warning = self.drought.note(group)
        if warning is not None:
            self.log(warning)
        self._stop_if_unavailable(records)
        self.changed.set()

    def _stop_if_unavailable(self, records: list[RolloutRecord]) -> None:
        stop = unavailable_service(records)
        if stop is not None:
            self._fail(stop)

    # --------------------------------------------------------------- steps

    def _log_unfinished_steps(self, reason: str) -> None:
        """A run that stops mid-step still says what its unfinished steps saw: a metrics line
        each (`errors/*`, `drops/*`, `stopped`; no trainer half) for the batches written but
        not yet trained and for the step being sampled, whose records (errors included) go to
        rollouts/step_N.jsonl. A resume discards all of it and samples those steps again."""
        for step, stats in self.batches.unfinished(self.step).items():
            row = self._metrics_row(step, stats, {}, {})
            row["stopped"] = reason
            self.monitor.log(row)

    def _metrics_row(
        self, step: int, stats: StepStats, eval_row: dict[str, float], trainer: dict[str, Any]
    ) -> dict[str, Any]:
        return self.metrics.row(
            step,
            stats,
            eval_row,
            trainer,
            sampler_restarts=self.counters["sampler_restarts"],
            probe_gap=self.sampler.probe_gaps.get(step + 1),
        )

    async def _advance_policy(self) -> bool:
        """Load the next broadcast if the trainer finished it; True if the version advanced."""
        nxt = self.version + 1
        if nxt > self.config.max_steps or not is_stable(self.run.broadcast(nxt)):
            return False
        async with self.sampler.rebuilding:  # never publish into a sampler being replaced
            await self.sampler.publish(nxt)
        self.version = nxt
        stats = self.batches.pending.pop(nxt - 1, None) or StepStats()
        eval_row = await self._maybe_eval(nxt)
        # a trainer that died after the broadcast stops the run now
        trainer = await self.metrics.trainer_half(nxt - 1, self.supervisor.check)
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
        assert self.sampler.backend is not None
        return await self.evaluate(version, self.sampler.backend)

    def _checkpoint(self, version: int) -> None:
        interval = self.config.ckpt.interval
        if version != self.config.max_steps and not (interval and version % interval == 0):
            return
        # The orchestrator state at `version`: batches < version trained, the cursor past every
        # task dispatched so far (in-flight groups are not replayed after a resume).
        state = orchestrator_state.OrchestratorState(
            step=version,
            task_cursor=self.tasks.cursor,
            rng_state=orchestrator_state.rng_to_json(self.rng),
            policy_version=version,
            config_digest=self.digest,
            counters=dict(self.counters),
        )
        orchestrator_state.save(self.run, state, self.config.ckpt.keep_last)

    # --------------------------------------------------------------- the run

    async def _wait_broadcast(self, version: int, watcher: asyncio.Task[None]) -> None:
        while not is_stable(self.run.broadcast(version)):
            if watcher.done():
                watcher.result()  # raises ChildDied
            await asyncio.sleep(POLL_S)

    async def run_training(self) -> None:
        """Sample, batch and publish until policy `max_steps` is loaded (and evaluated)."""
        watcher = asyncio.create_task(self.supervisor.watch())
        try:
            await self.sampler.start()
            await self._wait_broadcast(self.version, watcher)
            await self.sampler.publish(self.version)
            if self.version == 0 and self.evaluate is not None and self.oc.eval.at_start:
                assert self.sampler.backend is not None
                await self.evaluate(0, self.sampler.backend)
            while self.version < self.config.max_steps:
                if self.fatal is not None:
                    self._log_unfinished_steps(str(self.fatal))
                    raise self.fatal
                if watcher.done():
                    watcher.result()  # raises ChildDied
                for step in list(self.batches.pending):
                    layout.complete(self.run, step + 1)
                if await self._advance_policy():
                    continue
                if self.step < self.config.max_steps:
                    groups = self.batches.take(self.step)
                    if groups is not None:
                        self.batches.write(self.step, groups)
                        self.step += 1
                        continue
                    self._dispatch()
                    if not self.inflight and self.step > self.version + self.oc.max_async_level:
                        self.batches.stats.wait_policy_s += POLL_S
                self.changed.clear()
                try:
                    await asyncio.wait_for(self.changed.wait(), POLL_S)
                except TimeoutError:
                    pass
            for step in range(self.config.max_steps + 1):
                layout.complete(self.run, step)
        finally:
            watcher.cancel()
            await self._cancel_inflight()

    async def _cancel_inflight(self) -> None:
        jobs = list(self.inflight.values())
        for job in jobs:
            job.cancel()
        if jobs:
            await asyncio.wait(jobs, timeout=5)
        await self.sampler.close()
