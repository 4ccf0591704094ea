"""The orchestrator: async rollouts in groups, batches for the trainer, policies back in.

One event loop runs everything. Groups (`prime_env.run_rollouts(env, client, tasks=[t],
r=group_size)`: harnesses, tools, sandboxes and rubrics stay prime_env's) are dispatched up to
`max_inflight` at once within the async bound (dispatch.py); each finished group is screened
and given samples with advantages by the stage's algorithm (algorithms.py, stages.py) and
waits for a batch (batches.py). A batch is written once they hold `batch_size` rollouts, or
once the step has seen `max_groups_per_step` groups (a step always ends, with no update if
none had signal); the trainer child turns batch n into policy n+1, which is loaded into the
backend and checked with the probe (sampler.py) before anything is dispatched on it. At
assembly a group older than `n - max_off_policy_steps` is dropped. A run that stops keeps its
finished, untrained groups for the resume (unbatched.py).
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from prime_env.environment import Environment
from prime_env.record import RolloutRecord
from prime_env.tasks import Task
from trainer_bridge.checkpoints import layout, orchestrator_state
from trainer_bridge.children import ChildProcesses
from trainer_bridge.config import TrainConfig
from trainer_bridge.cores import idle_threads
from trainer_bridge.inference.base import BackendFactory, InferenceBackend
from trainer_bridge.inference.teachers import Teachers
from trainer_bridge.metrics import Monitor
from trainer_bridge.orchestrator import unbatched
from trainer_bridge.orchestrator.algorithm_api import GroupRequest, MakesGroups
from trainer_bridge.orchestrator.algorithms import make_group
from trainer_bridge.orchestrator.batches import Batches, StepStats
from trainer_bridge.orchestrator.dispatch import TaskOrder, target_step
from trainer_bridge.orchestrator.groups import Group
from trainer_bridge.orchestrator.health import no_signal, only_errors, unavailable_service
from trainer_bridge.orchestrator.progress import Progress
from trainer_bridge.orchestrator.sampler import SAMPLER_ERROR, Sampler
from trainer_bridge.orchestrator.stages import EnvLoader, StageRun, run_at, stage_runs
from trainer_bridge.orchestrator.step_metrics import StepMetrics
from trainer_bridge.protocol.run_dir import RunDir
from trainer_bridge.protocol.stable import is_stable

POLL_S = 0.1

EvalHook = Callable[[int, InferenceBackend], Awaitable[dict[str, float]]]


class Orchestrator:
    def __init__(
        self,
        config: TrainConfig,
        run: RunDir,
        env: Environment,
        make_backend: BackendFactory,
        children: ChildProcesses,
        monitor: Monitor,
        *,
        evaluate: EvalHook | None = None,
        resume: orchestrator_state.OrchestratorState | None = None,
        log: Callable[[str], None] = print,
        load_env: EnvLoader | None = None,
        progress: Progress | None = None,
        teachers: Teachers | None = None,
    ) -> None:
        self.config = config
        self.oc = config.orchestrator
        self.run = run
        self.env = env
        self.children = children
        self.monitor = monitor
        self.evaluate = evaluate
        self.log = log
        self.teachers = teachers or Teachers(config.model)
        self.stages = stage_runs(config, env, load_env, self.teachers)
        self.tasks = TaskOrder(config.seed, resume.task_cursor if resume else 0)
        self.step = resume.step if resume else 0
        self.version = resume.policy_version if resume else 0
        self.rng = (
            orchestrator_state.rng_from_json(resume.rng_state)
            if resume
            else random.Random(config.seed)
        )
        self.counters: Counter[str] = Counter(resume.counters if resume else {})
        self.digest = config.digest()
        self.batches = Batches(run, self.oc.max_off_policy_steps)
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
        self.progress = progress or Progress(run, None)
        self.inflight: dict[str, tuple[int, asyncio.Task[None]]] = {}
        """Groups being sampled, by key: (stage, task)."""
        self.changed = asyncio.Event()
        self.fatal: BaseException | None = None
        self.dispatched = 0
        self.kept_unbatched = False
        self.reused: set[int] = set()
        """Task-order indexes whose groups came back from the stopped run (not dispatched)."""
        if resume is not None:
            self._reuse(resume.step)
        self._start_progress()

    def _reuse(self, step: int) -> None:
        """Take back the groups the stopped run finished and did not train on (unbatched.py)."""
        for saved in unbatched.take(self.run, step):
            if saved.stage >= len(self.stages) or saved.stage < run_at(self.stages, step).index:
                continue
            algorithm = self.stages[saved.stage].algorithm
            if isinstance(algorithm, MakesGroups):  # its samples as it made them (a teacher's)
                group = saved.group()
            else:
                group = algorithm.screen(
                    saved.key, saved.dispatch_version, saved.records, saved.order
                )
                group.stage, group.reused = saved.stage, True
            if group.dropped is None:
                self.batches.ready.append(group)
                self.reused.add(saved.order)
        if self.reused:
            rollouts = self.batches.usable_rollouts()
            self.log(f"reusing {len(self.reused)} groups ({rollouts} rollouts) the run had sampled")

    def _start_progress(self) -> None:
        if self.step >= self.config.max_steps:
            self.progress.sampled_all(self.config.max_steps)
            return
        current = run_at(self.stages, self.step)
        self.progress.start_step(self.step, current.stage.name, current.oc.batch_size)

    def _fail(self, exc: BaseException) -> None:
        if self.fatal is None:
            self.fatal = exc
        self.changed.set()

    # --------------------------------------------------------------- groups

    def _dispatch(self) -> None:
        """Start groups while the async bound and max_inflight allow (dispatch.py)."""
        current = run_at(self.stages, self.step)
        max_inflight = self.oc.max_inflight or 2 * current.oc.groups_per_batch
        while len(self.inflight) < max_inflight:
            have: Counter[int] = Counter()
            for group in self.batches.ready:
                if group.dropped is None:
                    have[group.stage] += group.rollouts
            for index, _ in self.inflight.values():
                have[index] += self.stages[index].oc.rollouts_per_example
            target = target_step(
                self.step,
                self.version,
                max_async_level=self.oc.max_async_level,
                max_steps=self.config.max_steps,
                batch_size=lambda t: run_at(self.stages, t).oc.batch_size,
                stage_of=lambda t: run_at(self.stages, t).index,
                have=have,
            )
            if target is None:
                return
            stage = run_at(self.stages, target)
            index, task = self.tasks.next(stage.env.tasks)
            if index in self.reused:
                continue  # its group came back from the stopped run and waits in `ready`
            key = f"d{self.dispatched}-{task.id}"  # (dispatch, task): never merged by prompt
            self.dispatched += 1
            seed = self.config.seed * 1_000_003 + index if self.config.deterministic else None
            job = asyncio.create_task(self._run_group(key, index, task, stage, seed))
            self.inflight[key] = (stage.index, job)

    async def _run_group(
        self, key: str, order: int, task: Task, stage: StageRun, seed: int | None
    ) -> None:
        client = self.sampler.client()
        version = self.version
        sampling = replace(stage.sampling, seed=seed) if seed is not None else stage.sampling
        request = GroupRequest(
            key, version, order, stage.oc.rollouts_per_example, task, client, sampling,
            self.run.run_id,
        )  # fmt: skip
        try:
            group = await make_group(stage.algorithm, stage.env, request)
            records = group.records
            group.stage = stage.index
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
        self.progress.group_done(group, self.batches.usable_rollouts(stage.index))
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
        self._keep_unbatched()
        for step, stats in self.batches.unfinished(self.step).items():
            row = self._metrics_row(step, stats, {}, {})
            row["stopped"] = reason
            self.monitor.log(row)

    def _keep_unbatched(self) -> None:
        """Once, on a stop: the finished groups no checkpoint holds, for the resume."""
        if not self.kept_unbatched:
            self.kept_unbatched = True
            kept = unbatched.save(self.run, self.batches.unbatched())
            if kept:
                self.log(f"kept {kept} finished groups for the resume ({self.run.unbatched})")

    def _metrics_row(
        self, step: int, stats: StepStats, eval_row: dict[str, float], trainer: dict[str, Any]
    ) -> dict[str, Any]:
        stage = run_at(self.stages, step)
        return self.metrics.row(
            step,
            stats,
            eval_row,
            trainer,
            sampler_restarts=self.counters["sampler_restarts"],
            probe_gap=self.sampler.probe_gaps.get(step + 1),
            stage=stage.stage,
            weights=stage.weights,
            correctness=stage.env.correctness,
        )

    def _write_step(self, groups: list[Group]) -> None:
        """Write batch `step` and move on; a step with no update is counted, and
        `max_empty_steps` of them in a row stop the run (health.no_signal)."""
        stage = run_at(self.stages, self.step)
        if any(g.samples for g in groups):
            self.counters["empty_steps_in_a_row"] = 0
            self.counters["empty_groups_in_a_row"] = 0
        else:
            failed = only_errors(self.step, self.batches.stats.records)
            if failed is not None:
                self._fail(failed)
                return
            self.counters["empty_steps_in_a_row"] += 1
            self.counters["empty_groups_in_a_row"] += self.batches.stats.groups_seen
            in_a_row = self.counters["empty_steps_in_a_row"]
            if in_a_row >= self.oc.max_empty_steps:
                self._fail(no_signal(in_a_row, self.counters["empty_groups_in_a_row"]))
                return
            self.log(
                f"step {self.step}: no update, all {self.batches.stats.groups_seen} groups had "
                f"equal rewards ({in_a_row} such step(s) in a row; the run stops at "
                f"{self.oc.max_empty_steps})"
            )
        meta = {
            "stage": stage.index,
            "stage_name": stage.stage.name,
            "reward_weights": stage.weights,
        }
        self.batches.write(self.step, groups, meta)
        self.step += 1
        self._start_progress()

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
        trainer = await self.metrics.trainer_half(nxt - 1, self.children.check)
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
        self.batches.checkpointed(version)
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

    def _share_cores(self) -> None:
        """The sampler takes the trainer's core while the trainer waits for a batch (every
        batch written has its policy) and the machine has room (cores.idle_threads), and gives
        it back once a batch is being trained (not with --deterministic: the thread count
        changes the order of float sums)."""
        inference = self.config.inference
        trainer_idle = self.step == self.version and not self.config.deterministic
        own = inference.threads
        self.sampler.set_threads(
            idle_threads(inference.idle_trainer_threads, own) if trainer_idle else own
        )

    async def _wait_broadcast(self, version: int, watcher: asyncio.Task[None]) -> None:
        while not is_stable(self.run.broadcast(version)):
            if watcher.done():
                watcher.result()  # raises ChildDied
            await asyncio.sleep(POLL_S)

    async def run_training(self) -> None:
        """Sample, batch and publish until policy `max_steps` is loaded (and evaluated)."""
        watcher = asyncio.create_task(self.children.watch())
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
                    stage = run_at(self.stages, self.step)
                    groups = self.batches.take(
                        self.step, stage.index, stage.oc.batch_size, stage.oc.step_group_bound
                    )
                    if groups is not None:
                        self._write_step(groups)
                        continue
                    self._dispatch()
                    if not self.inflight and self.step > self.version + self.oc.max_async_level:
                        self.batches.stats.wait_policy_s += POLL_S
                        self.progress.waiting(f"waiting for policy {self.version + 1}")
                    else:
                        self.progress.waiting("")
                    self._share_cores()
                self.changed.clear()
                try:
                    await asyncio.wait_for(self.changed.wait(), POLL_S)
                except TimeoutError:
                    pass
            for step in range(self.config.max_steps + 1):
                layout.complete(self.run, step)
        except BaseException:
            self._keep_unbatched()
            raise
        finally:
            watcher.cancel()
            self.progress.close()
            await self._cancel_inflight()

    async def _cancel_inflight(self) -> None:
        jobs = [job for _, job in self.inflight.values()]
        for job in jobs:
            job.cancel()
        if jobs:
            await asyncio.wait(jobs, timeout=5)
        await self.sampler.close()
        await self.teachers.close()
