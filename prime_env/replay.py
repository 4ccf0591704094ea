"""Replay: re-score a finished run's saved completions with an environment's rubric (the same
version, or another), without a single model call, into a new run linked to the first.

What a rubric sees is rebuilt from each record: the prompt and completion messages, the task's
answer and info, the usage, the stop reason, and one response per assistant turn (with its
token ids when the record has them). A record that was an error stays that error: there is no
completion to score, and an outage is never turned into a reward. The environment's own state
keys (a game's `solved`, a tool counter) come back from the record's `state`, saved when
scoring began. A key the record does not hold (a live object such as a sandbox, or a record
written before state was saved) cannot be guessed: a rubric that reads one makes that rollout
a `scoring_error` naming the key, never a score from a default.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .clients.base import ChatResponse, Usage
from .clients.model_specs import ModelSpec
from .environment import Environment
from .errors import EvalError
from .eval_run_dir import EvalMetadata, EvalRunDir, ReplayOf, RunConfig
from .evaluation import EvalRun, start_run
from .record import ErrorInfo, RolloutRecord, Timing
from .rubric import Scores
from .run_status import COMPLETED
from .runner import error_info
from .state import State
from .summary import Summary, SummaryBuilder
from .tasks import Task


class ReplayState(State):
    """A rollout's state rebuilt from its record, which notes each key a rubric reads that the
    record could not give back (`misses`): with those the replay is a `scoring_error` naming the
    key, never a score computed from a default."""

    def __init__(self, *args: Any, unsaved: dict[str, str] | None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.unsaved = unsaved
        """Keys the run could not save, with why; None: the record kept no state at all."""
        self.misses: dict[str, str] = {}

    def _check(self, key: object) -> None:
        if not isinstance(key, str) or dict.__contains__(self, key):
            return
        if self.unsaved is None:
            self.misses[key] = (
                f"the rubric reads state[{key!r}], which this record does not hold (written "
                "before rollout state was saved): rerun the eval to replay it"
            )
        elif key in self.unsaved:
            self.misses[key] = (
                f"the rubric reads state[{key!r}], which the run could not save "
                f"({self.unsaved[key]})"
            )

    def __getitem__(self, key: str) -> Any:
        self._check(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self._check(key)
        return super().__contains__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self._check(key)
        return super().get(key, default)

    def setdefault(self, key: str, default: Any = None) -> Any:
        self._check(key)
        return super().setdefault(key, default)

    def pop(self, key: str, *default: Any) -> Any:
        self._check(key)
        return super().pop(key, *default)


def replay_state(record: RolloutRecord) -> ReplayState:
    """The state a rubric sees for `record`: what the record saved of the environment's own
    keys (`record.state`), and the SDK's keys rebuilt from the record's fields."""
    task = Task(
        prompt=record.prompt, answer=record.answer, info=dict(record.info), id=record.task_id
    )
    saved = record.state
    state = ReplayState(
        State.new(task, [dict(m) for m in record.prompt]),
        unsaved=dict(saved.unsaved) if saved is not None else None,
    )
    if saved is not None:
        state.update(saved.values)
    turns = record.turns or []
    offset = len(record.prompt)
    replies = [i for i, m in enumerate(record.completion) if m.get("role") == "assistant"]
    for index, position in enumerate(replies):
        turn = turns[index] if index < len(turns) else None
        state["responses"].append(
            ChatResponse(
                message=dict(record.completion[position]),
                finish_reason=None,
                usage=Usage(),
                prompt_token_ids=turn.prompt_token_ids if turn else None,
                completion_token_ids=turn.completion_token_ids if turn else None,
                completion_logprobs=turn.completion_logprobs if turn else None,
                policy_version=turn.policy_version if turn else None,
                model=record.served_model,
            )
        )
        state["replies"].append(offset + position)
    if record.trace is not None:
        if record.trace.calls:
            state["replies"] = [call.reply for call in record.trace.calls]
        if record.trace.simulated:
            state["simulated"] = list(record.trace.simulated)
    state["completion"] = [dict(m) for m in record.completion]
    state["usage"] = record.usage.model_dump()
    state["tools"] = record.tools
    state.stop_reason = record.stop_reason
    state.done = True
    return state


def source_spec(meta: EvalMetadata) -> ModelSpec:
    """The model a run was made with, as its metadata.json describes it (no key, ever), at no
    price: a replay calls no model, so it costs nothing."""
    info = meta.model_info
    return ModelSpec(
        name=str(info.get("name") or meta.model),
        model=str(info.get("model") or meta.model),
        provider=str(info.get("provider") or meta.provider or "unknown"),
        client=str(info.get("client") or "openai"),
        base_url=info.get("base_url"),
        key_var=info.get("api_key_var"),
        adapter=info.get("adapter"),
        price_per_mtok=(0.0, 0.0),
    )


class _Unsaved(Exception):
    """The rubric read state the record does not hold (the message names the key)."""


def _misses(state: ReplayState) -> None:
    if state.misses:
        raise _Unsaved("; ".join(state.misses.values()))


async def _rescore(env: Environment, group: list[RolloutRecord]) -> list[RolloutRecord]:
    """One example's records, re-scored: each rollout, then the group functions over the scored
    ones (as the runner does), each failure recorded as that rollout's `scoring_error`, and so
    is a score that read state the record does not hold."""
    rubric = env.rubric
    scored: list[tuple[RolloutRecord, ReplayState, Scores, float]] = []
    out: dict[int, RolloutRecord] = {}
    for record in group:
        if record.error is not None:
            out[record.rollout_index] = record
            continue
        state, started = replay_state(record), time.perf_counter()
        try:
            scores = await rubric.score_rollout(state)
            _misses(state)
        except Exception as exc:  # noqa: BLE001 - recorded as the rollout's error
            out[record.rollout_index] = _failed(record, _unsaved_first(state, exc), started)
            continue
        scored.append((record, state, scores, started))
    if rubric.has_group_funcs and scored:
        try:
            extra = await rubric.score_group([state for _, state, _, _ in scored])
            for _, state, _, _ in scored:
                _misses(state)
        except Exception as exc:  # noqa: BLE001 - recorded as the rollouts' error
            for record, state, _, started in scored:
                out[record.rollout_index] = _failed(record, _unsaved_first(state, exc), started)
            scored = []
        else:
            for (_, _, scores, _), more in zip(scored, extra):
                scores.merge(more)
    for record, _, scores, started in scored:
        out[record.rollout_index] = record.model_copy(
            update={
                "reward": rubric.reward(scores),
                "rewards": scores.rewards,
                "metrics": scores.metrics,
                "timing": _timing(record, started),
            }
        )
    return [out[index] for index in sorted(out)]


def _unsaved_first(state: ReplayState, exc: Exception) -> Exception:
    """What made the rubric fail: a key the record does not hold, when it read one (its
    KeyError or wrong arithmetic follow from that), else its own exception."""
    if state.misses and not isinstance(exc, _Unsaved):
        return _Unsaved("; ".join(state.misses.values()))
    return exc


def _failed(record: RolloutRecord, exc: BaseException, started: float) -> RolloutRecord:
    error = (
        ErrorInfo(type="scoring_error", message=str(exc)[:20_000])
        if isinstance(exc, _Unsaved)
        else error_info(exc, "scoring_error")
    )
    return record.model_copy(
        update={
            "reward": None,
            "rewards": {},
            "metrics": {},
            "error": error,
            "stop_reason": "error",
            "timing": _timing(record, started),
        }
    )


def _timing(record: RolloutRecord, started: float) -> Timing:
    scoring_ms = round((time.perf_counter() - started) * 1000, 3)
    return Timing(
        generation_ms=record.timing.generation_ms,
        scoring_ms=scoring_ms,
        total_ms=round(record.timing.generation_ms + scoring_ms, 3),
    )


async def replay_run(
    source: Path,
    env: Environment,
    env_spec: str,
    output_root: Path,
    on_record: Callable[[RolloutRecord], None] | None = None,
) -> tuple[EvalRun, Summary]:
    """Re-score the completed run at `source` with `env` (loaded from `env_spec`) into a new run
    under `output_root`; its metadata.json names the source (`replay_of`)."""
    source_dir = EvalRunDir.open(source)
    meta = source_dir.metadata()
    if meta.status != COMPLETED:
        raise EvalError(
            f"{source} is not a completed run (status {meta.status!r}); only a finished "
            f"run is replayed: finish it first (prime eval run --resume {source})"
        )
    records = source_dir.read_results()
    stored = source_dir.config()
    config = RunConfig(
        env=env_spec,
        env_version=env.version,
        env_args=stored.env_args,
        model=stored.model,
        base_url=stored.base_url,
        n=stored.n,
        r=stored.r,
        sampling=stored.sampling,
        api=stored.api,
    )
    run = start_run(env, source_spec(meta), config, output_root)
    run.dir.update_metadata(
        replay_of=ReplayOf(
            run_id=meta.run_id,
            directory=str(source.resolve()),
            env_id=meta.env_id,
            served_model=meta.served_model,
        )
    )
    summary = SummaryBuilder()
    groups: dict[int, list[RolloutRecord]] = {}
    for record in records:
        groups.setdefault(record.example_index, []).append(record)
    with run.results_path.open("a") as fh:
        for example in sorted(groups):
            for record in await _rescore(env, groups[example]):
                record = record.model_copy(update={"run_id": run.run_id, "env": env.id})
                fh.write(record.to_json() + "\n")
                summary.add(record)
                if record.served_model:
                    run.served_models.add(record.served_model)
                if on_record is not None:
                    on_record(record)
    result = summary.summary()
    run.write_metadata(result, COMPLETED)
    return run, result
