"""Rules that keep pushed results from poisoning means and leaderboards.

- JSON is parsed strictly: `NaN`, `Infinity` and numbers that overflow a float (`1e400`) are
  refused, and so is nesting past a depth limit (checked without recursion).
- Every score (reward, named rewards, numeric metrics) is finite and at most `MAX_ABS_SCORE`
  in size, so no sum over a run can overflow into an `inf` mean that ranks first.
- An environment may declare the range its rewards live in; samples outside it are refused.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

# Far beyond any real reward, small enough that 10^9 of them still sum to a finite float.
MAX_ABS_SCORE = 1e15


class IntegrityError(ValueError):
    """A body or sample the hub refuses (always a 400); the message names what and where."""


def _no_constants(name: str) -> Any:
    raise IntegrityError(f"{name} is not a number JSON allows; send finite numbers only")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise IntegrityError(f"the number {text[:40]} does not fit a 64-bit float")
    return value


def loads_strict(data: bytes | bytearray, max_depth: int) -> Any:
    """Parse a JSON body: NaN/Infinity/overflowing numbers and deep nesting are refused."""
    try:
        value = json.loads(data, parse_constant=_no_constants, parse_float=_finite_float)
    except RecursionError:
        raise IntegrityError(f"the JSON is nested deeper than {max_depth} levels") from None
    check_depth(value, max_depth)
    return value


def check_depth(value: Any, max_depth: int) -> None:
    """Refuse a document nested deeper than `max_depth` (checked without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > max_depth:
            raise IntegrityError(f"the JSON is nested deeper than {max_depth} levels")
        stack.extend((child, depth + 1) for child in children)


def _score_problem(value: Any) -> str | None:
    if isinstance(value, bool) or value is None or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return "is not a finite number"
    if abs(value) > MAX_ABS_SCORE:
        return f"is larger than {MAX_ABS_SCORE:g} in magnitude"
    return None


def check_scores(
    records: Sequence[dict[str, Any]], reward_range: tuple[float, float] | None
) -> None:
    """Every score finite and bounded; every reward within the environment's declared range."""
    for position, record in enumerate(records):
        fields: list[tuple[str, Any]] = [("reward", record.get("reward"))]
        for group in ("rewards", "metrics"):
            values = record.get(group)
            if isinstance(values, dict):
                fields.extend((f"{group}.{name}", v) for name, v in values.items())
        for where, value in fields:
            problem = _score_problem(value)
            if problem is not None:
                raise IntegrityError(f"samples[{position}].{where} {problem}")
        reward = record.get("reward")
        if (
            reward_range is not None
            and isinstance(reward, int | float)
            and record.get("error") is None
        ):
            low, high = reward_range
            if not low <= reward <= high:
                raise IntegrityError(
                    f"samples[{position}].reward is {reward}, outside the range [{low}, {high}] "
                    "this environment declares for its rewards"
                )
