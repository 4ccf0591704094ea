"""Re-scoring pushed rollout records with an environment's own rubric, without any model call.

The hub verifies a run by installing the run's exact environment version and running this in
a sandbox. Each record's task is the environment's own: its eval task at the record's
`example_index`, which must carry the record's `task_id`, prompt (as the harness builds it),
answer and info; a record whose task the pusher made up (an answer changed to fit a wrong
completion, one easy task under many indices) is a `mismatch`, never re-scored. The state
holds the pushed completion, and the rubric scores it as the runner would (per-rollout
functions, then group functions over each example's rollouts). A rubric that needs what only
the rollout had (a judge model, a tool's side effects kept in state) scores differently or
fails: the hub reports that as a disagreement or as not verifiable, never as verified.

    python -I -m prime_env.rescore REQUEST.json

REQUEST names the environment (`env`, `env_args`), the records (`samples`, JSON lines) and
where the scores go (`out`, JSON: the rubric's weights and one entry per record, in order:
scores, an `error`, or a `mismatch`).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, cast

from pydantic_core import to_jsonable_python

from .environment import Environment
from .loading import load
from .rubric import Scores
from .state import State
from .tasks import TaskSet


class Mismatch(ValueError):
    """The record's task is not the environment's own (the message says how)."""


def _jsonable(value: Any) -> Any:
    """`value` as a pushed record carries it (records are pydantic JSON)."""
    return json.loads(json.dumps(to_jsonable_python(value)))


def _state(env: Environment, tasks: TaskSet, record: dict[str, Any]) -> State:
    """The state the runner started `record`'s rollout from, holding its pushed completion."""
    index = record.get("example_index")
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(tasks):
        raise Mismatch(f"example {index} is not one of the environment's {len(tasks)} eval tasks")
    task = tasks[index]
    if str(record.get("task_id") or "") != task.id:
        raise Mismatch(f"example {index} is task {task.id}, not {record.get('task_id')}")
    state = env.harness.start(task)
    for name, ours in (("prompt", state.prompt), ("answer", task.answer), ("info", task.info)):
        if _jsonable(record.get(name)) != _jsonable(ours):
            raise Mismatch(f"its {name} is not the environment's for example {index}")
    completion = record.get("completion") or []
    state["completion"] = (
        [{"role": "assistant", "content": completion}]
        if isinstance(completion, str)
        else completion
    )
    state["stop_reason"] = record.get("stop_reason")
    return state


async def rescore(env: Environment, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per record: `reward`, `rewards`, `metrics` as the rubric scores it now, or
    `error` (the exception, as text) when a function raised."""
    rubric = env.rubric
    tasks = env.get_eval_tasks()
    states: list[State | None] = []
    mismatches: list[str | None] = []
    for record in records:
        try:
            states.append(_state(env, tasks, record))
            mismatches.append(None)
        except Mismatch as exc:
            states.append(None)
            mismatches.append(str(exc)[:500])
    scores: list[Scores | None] = []
    errors: list[str | None] = []
    for state in states:
        if state is None:
            scores.append(None)
            errors.append(None)
            continue
        try:
            scores.append(await rubric.score_rollout(state))
            errors.append(None)
        except Exception as exc:  # noqa: BLE001 - reported per record, like the runner does
            scores.append(None)
            errors.append(f"{type(exc).__name__}: {exc}"[:500])
    if rubric.has_group_funcs:
        groups: dict[Any, list[int]] = defaultdict(list)
        for position, record in enumerate(records):
            if scores[position] is not None:
                groups[record.get("example_index")].append(position)
        for members in groups.values():
            members.sort(key=lambda p: records[p].get("rollout_index") or 0)
            try:
                extra = await rubric.score_group([cast(State, states[p]) for p in members])
            except Exception as exc:  # noqa: BLE001
                for p in members:
                    scores[p], errors[p] = None, f"{type(exc).__name__}: {exc}"[:500]
                continue
            for p, more in zip(members, extra, strict=True):
                own = scores[p]
                if own is not None:
                    own.merge(more)
    return [
        {"mismatch": mismatch}
        if mismatch is not None
        else {"error": error}
        if score is None
        else {"reward": rubric.reward(score), "rewards": score.rewards, "metrics": score.metrics}
        for score, error, mismatch in zip(scores, errors, mismatches, strict=True)
    ]


def main(argv: list[str] | None = None) -> int:
    """Run a REQUEST file (see the module docstring); 0 when every record was scored or
    reported, 1 when the environment itself could not be loaded (the reason on stderr)."""
    args = sys.argv[1:] if argv is None else argv
    request = json.loads(Path(args[0]).read_text())
    try:
        env = load(request["env"], **request.get("env_args", {}))
    except Exception as exc:  # noqa: BLE001 - the hub reports it: the run cannot be re-scored
        print(f"cannot load {request['env']}: {type(exc).__name__}: {exc}"[:2000], file=sys.stderr)
        return 1
    with open(request["samples"], encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle if line.strip()]
    results = asyncio.run(rescore(env, records))
    weights = {func.name: func.weight for func in env.rubric.funcs}
    Path(request["out"]).write_text(json.dumps({"weights": weights, "scores": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
