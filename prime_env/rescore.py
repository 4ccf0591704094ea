"""Re-scoring pushed rollout records with an environment's own rubric, without any model call.

The hub verifies a run by installing the run's exact environment version and running this in
a sandbox: each record's task is rebuilt from the record (prompt, answer, info), its state
holds the pushed completion, and the rubric scores it as the runner would (per-rollout
functions, then group functions over each example's rollouts). A rubric that needs what only
the rollout had (a judge model, a tool's side effects kept in state) scores differently or
fails: the hub reports that as a disagreement or as not verifiable, never as verified.

    python -I -m prime_env.rescore REQUEST.json

REQUEST names the environment (`env`, `env_args`), the records (`samples`, JSON lines) and
where the scores go (`out`, JSON: the rubric's weights and one entry per record, in order).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from .environment import Environment
from .loading import load
from .rubric import Scores
from .state import State
from .tasks import Task


def _state(record: dict[str, Any]) -> State:
    prompt = record.get("prompt") or []
    if isinstance(prompt, str):
        prompt = [{"role": "user", "content": prompt}]
    task = Task(
        prompt=list(prompt),
        answer=record.get("answer"),
        info=dict(record.get("info") or {}),
        id=str(record.get("task_id") or ""),
    )
    state = State.new(task, list(prompt))
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
    states = [_state(record) for record in records]
    scores: list[Scores | None] = []
    errors: list[str | None] = []
    for state in states:
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
                extra = await rubric.score_group([states[p] for p in members])
            except Exception as exc:  # noqa: BLE001
                for p in members:
                    scores[p], errors[p] = None, f"{type(exc).__name__}: {exc}"[:500]
                continue
            for p, more in zip(members, extra, strict=True):
                own = scores[p]
                if own is not None:
                    own.merge(more)
    return [
        {"error": error}
        if score is None
        else {"reward": rubric.reward(score), "rewards": score.rewards, "metrics": score.metrics}
        for score, error in zip(scores, errors, strict=True)
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
