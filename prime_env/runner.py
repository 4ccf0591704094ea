"""The rollout runner: many rollouts on one event loop, scored as they finish.

Generation is bounded by `concurrency` workers (the clients' adaptive limiter backs off on
429s); scoring runs in separate tasks so a slow judge never holds a generation slot, and starts
once a burst of finished generations is over (`_ScoringQueue`), so the burst's next model
requests go first. A rollout whose infrastructure failed becomes a record with `error` set and
`reward` None: it is counted, never averaged in as a 0.

`stream_rollouts` hands each record on and forgets it, and makes rollouts lazily as workers
take them, so memory is bounded by the concurrency (plus unfinished groups), not by the run's
size; `run_rollouts` collects them for callers that want a list. When one loop is the limit,
prime_env.parallel runs the same thing in several processes.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from .clients.base import ModelClient, SamplingArgs
from .environment import Environment
from .errors import infra_error_type
from .process.fd_table import reserve_fds
from .record import (
    ErrorInfo,
    RolloutRecord,
    SavedState,
    Timing,
    TokenUsage,
    Trace,
    Turn,
    UserUsage,
)
from .rubric import Scores
from .state import State
from .tasks import Task
from .trace_graph import TraceGraph, linear_trace

RecordCallback = Callable[[RolloutRecord], Any]


def error_info(exc: BaseException, fallback: str = "environment_error") -> ErrorInfo:
    """How an exception is recorded: provider and infra failures keep their own type; anything
    else is a bug in the environment (or its rubric) and is labelled `fallback`."""
    infra = infra_error_type(exc)
    if infra is not None:
        return ErrorInfo(type=infra, message=str(getattr(exc, "message", exc)))
    return ErrorInfo(type=fallback, message=f"{type(exc).__name__}: {exc}")


def rollout_sampling(sampling: SamplingArgs, rollout: _Rollout) -> SamplingArgs:
    """A seeded run gives each rollout a seed of its own, derived from (seed, example, rollout).

    WHY: a server given one seed returns one answer, so the r rollouts of a task would all be
    the same; and a rollout's randomness must not depend on which other requests a server
    happened to batch it with (timing), or a seeded run is not reproducible (`prime train
    --deterministic`, a resumed eval)."""
    if sampling.seed is None:
        return sampling
    key = f"{sampling.seed}/{rollout.example_index}/{rollout.rollout_index}".encode()
    derived = int.from_bytes(hashlib.blake2b(key, digest_size=4).digest(), "big") >> 1
    return replace(sampling, seed=derived)  # 31 bits: every server accepts it


@dataclass
class _Rollout:
    example_index: int
    rollout_index: int
    task: Task
    state: State | None = None
    saved: SavedState | None = None
    """The environment's state keys when generation ended, before the rubric ran."""
    error: ErrorInfo | None = None
    scores: Scores = field(default_factory=Scores)
    started: float = 0.0
    generation_ms: float = 0.0
    scoring_ms: float = 0.0


class _ScoringQueue:
    """Finished generations wait here until their burst is over, then each is scored in a task.

    Why: against a server with fixed latency, replies come back in waves, and a wave's last
    request leaves only after the client has turned every earlier reply around. Scoring and
    writing a record is about a quarter of a rollout's CPU; done as each reply comes in, it sits
    between one reply and the next request. Started once no generation has finished for
    `QUIET_S`, it runs in the wait for the next wave instead (`-c 512` at 200 ms:
    docs/benchmarks.md, "Eval runner"). At most `limit` rollouts wait (the run's concurrency):
    a steady stream of replies, which has no quiet moments, is scored in batches of that size,
    and memory stays bounded by the concurrency.
    """

    QUIET_S = 0.010
    """Replies within a burst come ~0.1 ms apart at `-c 512`, with gaps of a few ms where the
    server pauses (its collector, timer ticks): 2 ms split bursts and lost half the gain. An
    inference server's batches come tens of ms apart: scoring runs in those gaps."""

    def __init__(self, start: Callable[[_Rollout], None], limit: int) -> None:
        self._start = start
        self._limit = limit
        self._waiting: list[_Rollout] = []
        self._timer: asyncio.TimerHandle | None = None
        self._last = 0.0

    def add(self, rollout: _Rollout) -> None:
        loop = asyncio.get_running_loop()
        self._waiting.append(rollout)
        self._last = loop.time()
        if len(self._waiting) >= self._limit:
            self.flush()
        elif self._timer is None:
            self._timer = loop.call_later(self.QUIET_S, self._when_quiet)

    def _when_quiet(self) -> None:
        loop = asyncio.get_running_loop()
        quiet_for = loop.time() - self._last
        if quiet_for >= self.QUIET_S:
            self.flush()
        else:
            self._timer = loop.call_later(self.QUIET_S - quiet_for, self._when_quiet)

    def flush(self) -> None:
        """Start scoring everything waiting, now."""
        self.close()
        waiting, self._waiting = self._waiting, []
        for rollout in waiting:
            self._start(rollout)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


@dataclass
class _Group:
    expected: int
    done: list[_Rollout] = field(default_factory=list)


def _plan(
    chosen: Sequence[Task], r: int, skipped: set[tuple[int, int]], examples: Iterable[int]
) -> tuple[int, dict[int, int], Iterator[_Rollout]]:
    """How many rollouts are to run, how many per example, and the rollouts themselves, made one
    at a time as workers take them (a million-rollout run never holds a million of them)."""
    todo = {i: r - sum((i, j) in skipped for j in range(r)) for i in examples}
    todo = {i: count for i, count in todo.items() if count}

    def rollouts() -> Iterator[_Rollout]:
        for i in todo:
            for j in range(r):
                if (i, j) not in skipped:
                    yield _Rollout(i, j, chosen[i])

    return sum(todo.values()), todo, rollouts()


def choose_tasks(env: Environment, n: int | None, tasks: Sequence[Task] | None) -> list[Task]:
    """The tasks a run covers: `tasks` (the trainer's) or the env's eval tasks, the first `n`
    of them (all when n is None or negative)."""
    chosen = list(tasks) if tasks is not None else list(env.get_eval_tasks().head(n))
    if tasks is not None and n is not None and n >= 0:
        chosen = chosen[:n]
    return chosen


async def stream_rollouts(
    env: Environment,
    client: ModelClient,
    *,
    on_record: RecordCallback,
    n: int | None = None,
    r: int = 1,
    concurrency: int = 32,
    sampling: SamplingArgs | None = None,
    skip: Collection[tuple[int, int]] = (),
    run_id: str | None = None,
    policy_version: int | None = None,
    tasks: Sequence[Task] | None = None,
    examples: Iterable[int] | None = None,
) -> int:
    """Run `r` rollouts of each of the first `n` eval tasks and hand each record to `on_record`
    (sync or async) once it is scored — scoring starts when the burst of replies it came in is
    over (`_ScoringQueue`); with group rewards, once its whole group is scored — without
    keeping it: memory stays bounded by the concurrency, not the run's size.

    `skip` lists (example_index, rollout_index) pairs already done (for `--resume`); `tasks`
    overrides the env's eval tasks (the trainer uses it); `examples` restricts the run to those
    example indices (one worker process's share). Returns the number of records produced.
    """
    if r < 1:
        raise ValueError("r (rollouts per example) must be at least 1")
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    chosen = choose_tasks(env, n, tasks)
    reserve_fds(concurrency)  # one connection per rollout in flight, opened in the first wave
    total, expected, pending = _plan(
        chosen, r, set(skip), range(len(chosen)) if examples is None else examples
    )
    run_id = run_id or uuid.uuid4().hex
    sampling = sampling or SamplingArgs()
    groups: dict[int, _Group] = {}
    scoring: set[asyncio.Task[None]] = set()
    rubric = env.rubric

    async def emit(rollout: _Rollout) -> None:
        result = on_record(_record(env, client, run_id, rollout, policy_version))
        if inspect.isawaitable(result):
            await result

    async def score(rollout: _Rollout) -> None:
        if rollout.error is None and rollout.state is not None:
            t0 = time.perf_counter()
            try:
                rollout.scores = await rubric.score_rollout(rollout.state)
            except Exception as exc:  # noqa: BLE001 - recorded as the rollout's error
                rollout.error = error_info(exc, "scoring_error")
            rollout.scoring_ms += (time.perf_counter() - t0) * 1000
        if not rubric.has_group_funcs:
            await emit(rollout)
            return
        group = groups.setdefault(rollout.example_index, _Group(expected[rollout.example_index]))
        group.done.append(rollout)
        if len(group.done) < group.expected:
            return
        del groups[rollout.example_index]
        members = sorted(group.done, key=lambda x: x.rollout_index)
        scored = [m for m in members if m.error is None and m.state is not None]
        t0 = time.perf_counter()
        try:
            group_scores = await rubric.score_group([m.state for m in scored])  # type: ignore[misc]
            for member, extra in zip(scored, group_scores):
                member.scores.merge(extra)
        except Exception as exc:  # noqa: BLE001 - recorded as the rollout's error
            for member in scored:
                member.error = error_info(exc, "scoring_error")
        elapsed = (time.perf_counter() - t0) * 1000
        for member in members:
            member.scoring_ms += elapsed
            await emit(member)

    def start_scoring(rollout: _Rollout) -> None:
        job = asyncio.create_task(score(rollout))
        scoring.add(job)
        job.add_done_callback(scoring.discard)

    finished = _ScoringQueue(start_scoring, concurrency)

    async def worker() -> None:
        for rollout in pending:
            rollout.started = time.perf_counter()
            rollout.state = env.harness.start(rollout.task)
            try:
                await env.harness.execute(
                    client, rollout.state, rollout_sampling(sampling, rollout)
                )
            except Exception as exc:  # noqa: BLE001 - recorded as the rollout's error
                rollout.error = error_info(exc)
            else:
                rollout.saved = rollout.state.saved()
            rollout.generation_ms = (time.perf_counter() - rollout.started) * 1000
            finished.add(rollout)

    workers = [asyncio.create_task(worker()) for _ in range(min(concurrency, total))]
    try:
        await asyncio.gather(*workers)
        finished.flush()
        while scoring:
            await asyncio.gather(*list(scoring))
    finally:
        finished.close()
        for job in [*workers, *scoring]:
            job.cancel()
    return total


async def run_rollouts(
    env: Environment,
    client: ModelClient,
    *,
    n: int | None = None,
    r: int = 1,
    concurrency: int = 32,
    sampling: SamplingArgs | None = None,
    skip: Collection[tuple[int, int]] = (),
    on_record: RecordCallback | None = None,
    run_id: str | None = None,
    policy_version: int | None = None,
    tasks: Sequence[Task] | None = None,
) -> list[RolloutRecord]:
    """`stream_rollouts` that also returns all new records, ordered by (example_index,
    rollout_index): for the trainer's batches and for notebooks. An eval run writes its
    records to disk instead (prime_env.evaluation), so its memory does not grow with its size.
    """
    records: list[RolloutRecord] = []

    async def collect(record: RolloutRecord) -> None:
        records.append(record)
        if on_record is not None:
            result = on_record(record)
            if inspect.isawaitable(result):
                await result

    await stream_rollouts(
        env,
        client,
        on_record=collect,
        n=n,
        r=r,
        concurrency=concurrency,
        sampling=sampling,
        skip=skip,
        run_id=run_id,
        policy_version=policy_version,
        tasks=tasks,
    )
    records.sort(key=lambda rec: rec.key)
    return records


def _record(
    env: Environment,
    client: ModelClient,
    run_id: str,
    rollout: _Rollout,
    policy_version: int | None,
) -> RolloutRecord:
    state = rollout.state
    task = rollout.task
    failed = rollout.error is not None
    turns = None
    if state is not None and any(resp.completion_token_ids is not None for resp in state.responses):
        turns = [
            Turn(
                prompt_token_ids=resp.prompt_token_ids,
                completion_token_ids=resp.completion_token_ids,
                completion_logprobs=resp.completion_logprobs,
                policy_version=resp.policy_version,
            )
            for resp in state.responses
        ]
        versions = [t.policy_version for t in turns if t.policy_version is not None]
        if policy_version is None and versions:
            policy_version = min(versions)  # a record is as old as its oldest turn
    return RolloutRecord(
        run_id=run_id,
        env=env.id,
        env_args=env.env_args,
        task_id=task.id,
        example_index=rollout.example_index,
        rollout_index=rollout.rollout_index,
        model=client.model,
        served_model=next((resp.model for resp in reversed(state.responses) if resp.model), None)
        if state is not None
        else None,
        prompt=state.prompt if state is not None else [dict(m) for m in task.prompt],
        completion=state.completion if state is not None else [],
        answer=task.answer,
        info=task.info,
        reward=None if failed else env.rubric.reward(rollout.scores),
        rewards={} if failed else rollout.scores.rewards,
        metrics={} if failed else rollout.scores.metrics,
        error=rollout.error,
        stop_reason="error" if failed else (state.stop_reason if state is not None else None),
        usage=TokenUsage(**state["usage"]) if state is not None else TokenUsage(),
        user_usage=UserUsage(**state["user_usage"])
        if state is not None and "user_usage" in state
        else None,
        timing=Timing(
            generation_ms=round(rollout.generation_ms, 3),
            scoring_ms=round(rollout.scoring_ms, 3),
            total_ms=round((time.perf_counter() - rollout.started) * 1000, 3),
        ),
        policy_version=policy_version,
        turns=turns,
        trace=_trace(state) if state is not None else None,
        tools=state.tools if state is not None else None,
        state=None if failed else rollout.saved,
    )


def _trace(state: State) -> Trace | None:
    """The record's trace: an agent program's graph, or a linear rollout's when it marks
    simulated-user messages; None for every other (linear) rollout."""
    graph = state.get("trace")
    simulated = state.get("simulated") or ()
    if isinstance(graph, TraceGraph) and graph.calls:
        trace = graph.to_record()
        trace.simulated = sorted(simulated)
        return trace
    if simulated:
        return linear_trace(state["replies"], len(state.prompt) + len(state.completion), simulated)
    return None


def run_rollouts_sync(env: Environment, client: ModelClient, **kwargs: Any) -> list[RolloutRecord]:
    """`run_rollouts` for synchronous callers, including ones inside a running event loop
    (Jupyter), where `asyncio.run` would fail: then it runs on a fresh loop in a thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(run_rollouts(env, client, **kwargs))
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, run_rollouts(env, client, **kwargs)).result()
