"""A stored sample as the run page shows it: every field read defensively.

Samples are kept as pushed, and a run may hold ones stored before today's rules (a score sent
as a string, an index past what a column holds, a `rewards` that is a list): the page shows
what it can read and a dash for the rest, never an error.
"""

from __future__ import annotations

import json
from typing import Any

from hub_server.evals.integrity import finite_score, index_problem
from hub_server.web.render import messages


def _index(value: Any) -> int | None:
    return value if index_problem(value) is None else None


def _error(value: Any) -> dict[str, str] | None:
    if value is None or value == "":
        return None
    if isinstance(value, dict):
        return {
            "type": str(value.get("type") or "Error"),
            "message": str(value.get("message") or ""),
        }
    return {"type": str(value), "message": ""}


def _scores(record: dict[str, Any]) -> list[tuple[str, float | None, bool]]:
    """(name, score or None, is a metric) of the sample's named rewards, then its metrics."""
    shown = []
    for group, is_metric in (("rewards", False), ("metrics", True)):
        values = record.get(group)
        if isinstance(values, dict):
            for name in sorted(values, key=str):
                shown.append((str(name), finite_score(values[name]), is_metric))
    return shown


def _text(value: Any) -> str | None:
    if value is None or value == "":
        return None
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def sample_view(record: Any) -> dict[str, Any]:
    """What the run page's template reads of one sample."""
    if not isinstance(record, dict):
        record = {}
    error = _error(record.get("error"))
    return {
        "example_index": _index(record.get("example_index")),
        "rollout_index": _index(record.get("rollout_index")),
        "error": error,
        "reward": None if error else finite_score(record.get("reward")),
        "stop_reason": _text(record.get("stop_reason")),
        "scores": _scores(record),
        "prompt": messages(record.get("prompt")),
        "completion": messages(record.get("completion")),
        "answer": _text(record.get("answer")),
    }
