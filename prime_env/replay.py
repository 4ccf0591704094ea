"""Replay: re-score a finished run's saved completions with an environment's rubric (the same
version, or another), without a single model call, into a new run linked to the first.

What a rubric sees is rebuilt from each record: the prompt and completion messages, the task's
answer and info, the usage, the stop reason, and one response per assistant turn (with its
token ids when the record has them). A record that was an error stays that error: there is no
completion to score, and an outage is never turned into a reward. State an environment kept
outside the messages (a sandbox, a tool's scratch) is gone; a reward function that needs it
fails, and its rollouts become `scoring_error` records, never zeros.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from .clients.base import ChatResponse, Usage
from .clients.model_specs import ModelSpec
from .environment import Environment
from .errors import EvalError
from .eval_run_dir import EvalMetadata, EvalRunDir, ReplayOf, RunConfig
from .evaluation import EvalRun, start_run
from .record import RolloutRecord, Timing
from .rubric import Scores
from .run_status import COMPLETED
from .runner import error_info
from .state import State
from .summary import Summary, SummaryBuilder
from .tasks import Task


def replay_state(record: RolloutRecord) -> State:
    """The state a rubric sees for `record`, rebuilt from what the record saved."""
    task = Task(
        prompt=record.prompt, answer=record.answer, info=dict(record.info), id=record.task_id
    )
    state = State.new(task, [dict(m) for m in record.prompt])
    turns = record.turns or []
    replies = [m for m in record.completion if m.get("role") == "assistant"]
    for index, message in enumerate(replies):
        turn = turns[index] if index < len(turns) else None
        state["responses"].append(
            ChatResponse(
                message=dict(message),
                finish_reason=None,
                usage=Usage(),
                prompt_token_ids=turn.prompt_token_ids if turn else None,
                completion_token_ids=turn.completion_token_ids if turn else None,
                completion_logprobs=turn.completion_logprobs if turn else None,
                policy_version=turn.policy_version if turn else None,
                model=record.served_model,
            )
        )
    state["completion"] = [dict(m) for m in record.completion]
    state["usage"] = record.usage.model_dump()
    state.stop_reason = record.stop_reason
    state.done = True
    return state


def source_spec(meta: EvalMetadata) -> ModelSpec:
    """The model a run was made with, as its metadata.json describes it (no key, ever)."""
    info = meta.model_info
    return ModelSpec(
        name=str(info.get("name") or meta.model),
        model=str(info.get("model") or meta.model),
        provider=str(info.get("provider") or meta.provider or "unknown"),
        client=str(info.get("client") or "openai"),
        base_url=info.get("base_url"),
        key_var=info.get("api_key_var"),
        adapter=info.get("adapter"),
    )


async def _rescore(env: Environment, group: list[RolloutRecord]) -> list[RolloutRecord]:
    """One example's records, re-scored: each rollout, then the group functions over the scored
    ones (as the runner does), each failure recorded as that rollout's `scoring_error`."""
    rubric = env.rubric
    scored: list[tuple[RolloutRecord, State, Scores, float]] = []
    out: dict[int, RolloutRecord] = {}
    for record in group:
        if record.error is not None:
            out[record.rollout_index] = record
            continue
        state, started = replay_state(record), time.perf_counter()
        try:
            scores = await rubric.score_rollout(state)
        except Exception as exc:  # noqa: BLE001 - recorded as the rollout's error
            out[record.rollout_index] = _failed(record, exc, started)
            continue
        scored.append((record, state, scores, started))
    if rubric.has_group_funcs and scored:
        try:
            extra = await rubric.score_group([state for _, state, _, _ in scored])
        except Exception as exc:  # noqa: BLE001 - recorded as the rollouts' error
            for record, _, _, started in scored:
                out[record.rollout_index] = _failed(record, exc, started)
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


def _failed(record: RolloutRecord, exc: BaseException, started: float) -> RolloutRecord:
    return record.model_copy(
        update={
            "reward": None,
            "rewards": {},
            "metrics": {},
            "error": error_info(exc, "scoring_error"),
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
