"""A stored sample as the run page shows it: every field read defensively, and bounded.

Samples are kept as pushed, and a run may hold ones stored before today's rules (a score sent
as a string, an index past what a column holds, a `rewards` that is a list): the page shows
what it can read and a dash for the rest, never an error.

A page shows 20 samples, and one completion can be 20 MiB: each sample's prompt and
completion get a budget of characters and of messages, and what is past it is cut, with a
note that says how much and a link to the run's JSONL, which holds every sample whole. A page
of samples stays under a megabyte of text whatever was pushed.
"""

from __future__ import annotations

import json
from typing import Any

from hub_server.evals.integrity import finite_score, index_problem
from hub_server.web.render import messages
from hub_server.web.trace_view import trace_tree

# (characters, messages) shown of a sample's prompt and of its completion.
PROMPT_BUDGET = (8_000, 20)
COMPLETION_BUDGET = (16_000, 20)
MAX_FIELD = 2_000  # an answer, an error message, a stop reason
MAX_SCORES = 64


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
                shown.append((str(name)[:128], finite_score(values[name]), is_metric))
    return shown[:MAX_SCORES]


def _text(value: Any) -> str | None:
    if value is None or value == "":
        return None
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= MAX_FIELD else text[:MAX_FIELD] + "…"


def bounded_messages(value: Any, budget: tuple[int, int]) -> tuple[list[dict[str, Any]], int, int]:
    """The messages of a prompt or completion within `budget` (characters, messages): each
    shown message's text is cut where the characters run out (`cut`: how many were left out
    of it); messages past the count are not shown. Also returns how many messages were not
    shown and how many characters in all."""
    chars, count = budget
    shown: list[dict[str, Any]] = []
    left_out = hidden = 0
    for message in messages(value):
        text = message["content"]
        if len(shown) >= count:
            left_out += 1
            hidden += len(text)
            continue
        kept = text[: max(chars, 0)]
        chars -= len(kept)
        shown.append({"role": message["role"][:40], "content": kept, "cut": len(text) - len(kept)})
        hidden += len(text) - len(kept)
    return shown, left_out, hidden


def sample_view(record: Any) -> dict[str, Any]:
    """What the run page's template reads of one sample."""
    if not isinstance(record, dict):
        record = {}
    error = _error(record.get("error"))
    prompt, prompt_left_out, prompt_hidden = bounded_messages(record.get("prompt"), PROMPT_BUDGET)
    completion, completion_left_out, completion_hidden = bounded_messages(
        record.get("completion"), COMPLETION_BUDGET
    )
    return {
        "example_index": _index(record.get("example_index")),
        "rollout_index": _index(record.get("rollout_index")),
        "error": error,
        "reward": None if error else finite_score(record.get("reward")),
        "stop_reason": _text(record.get("stop_reason")),
        "scores": _scores(record),
        "prompt": prompt,
        "prompt_left_out": prompt_left_out,
        "completion": completion,
        "completion_left_out": completion_left_out,
        "truncated": prompt_hidden + completion_hidden,
        "answer": _text(record.get("answer")),
        "trace": trace_tree(record),  # read from the whole record: its indices are into it
    }
