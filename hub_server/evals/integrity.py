"""Rules that keep pushed results from poisoning means, leaderboards and pages.

- JSON is parsed strictly: `NaN`, `Infinity`, numbers that overflow a float (`1e400`) and
  integers of hundreds of digits are refused, and so is nesting past a depth limit (checked
  without recursion).
- Every score (reward, named rewards, metrics) is a JSON number, never a string or a boolean
  that a lax parser would turn into one, finite and at most `MAX_ABS_SCORE` in size, so no sum
  over a run can overflow into an `inf` mean that ranks first.
- Every index and count is a JSON integer in `0..MAX_INDEX`, what the narrowest column it is
  stored in holds (PostgreSQL's INTEGER), so no row insert or page query can overflow.
- An environment may declare the range its rewards live in; samples outside it are refused.
  A version may declare its rubric (each function's weight and range): a sample must then be
  what that rubric can produce, its reward the weighted sum of its components.

`finite_score` is the reading side of the same rule: stored data from before a rule existed is
shown as missing, never trusted to be a number.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from registry_index.bounds import MAX_ABS_SCORE, MAX_STORED_INT
from registry_index.nesting import lone_surrogate_at, nests_deeper_than
from registry_index.rubric_spec import RubricSpec
from registry_index.schemas.request import surrogate_problem

# The example and rollout index columns (PostgreSQL INTEGER).
MAX_INDEX = MAX_STORED_INT
# A JSON integer literal longer than this is refused while parsing (Python refuses to convert
# more than 4,300 digits at all, with an error that is not a JSON error).
_MAX_INT_DIGITS = 40
# Named rewards and metrics per sample, and the length of a name: a page lists them all.
MAX_SCORES_PER_SAMPLE = 256
MAX_SCORE_NAME = 128


class IntegrityError(ValueError):
    """A body or sample the hub refuses (always a 400); the message names what and where."""


def _no_constants(name: str) -> Any:
    raise IntegrityError(f"{name} is not a number JSON allows; send finite numbers only")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise IntegrityError(f"the number {text[:40]} does not fit a 64-bit float")
    return value


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > _MAX_INT_DIGITS:
        raise IntegrityError(
            f"the integer {text[:20]}… has {len(text)} digits; no field takes more than "
            f"{_MAX_INT_DIGITS}"
        )
    return int(text)


def loads_strict(data: bytes | bytearray, max_depth: int) -> Any:
    """Parse a JSON body: NaN/Infinity/overflowing numbers, deep nesting and text that is not
    Unicode (a lone surrogate, named by its path) are refused."""
    too_deep = f"the JSON is nested deeper than {max_depth} levels"
    try:
        value = json.loads(
            data, parse_constant=_no_constants, parse_float=_finite_float, parse_int=_bounded_int
        )
    except RecursionError:
        raise IntegrityError(too_deep) from None
    if nests_deeper_than(value, max_depth):
        raise IntegrityError(too_deep)
    surrogate = lone_surrogate_at(value)
    if surrogate is not None:
        raise IntegrityError(surrogate_problem(surrogate))
    return value


def _kind(value: Any) -> str:
    """What a JSON value is, for a message: `a string ("1.7e308")`, `true`, `an object`."""
    if isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, str):
        return f"a string ({json.dumps(value[:40])})"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    return type(value).__name__


def score_problem(value: Any) -> str | None:
    """Why `value` is not a score the hub stores (None when it is one)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"is {_kind(value)}, not a number: send every score as a JSON number"
    if isinstance(value, float) and not math.isfinite(value):
        return "is not a finite number"
    if abs(value) > MAX_ABS_SCORE:
        return f"is larger than {MAX_ABS_SCORE:g} in magnitude"
    return None


def index_problem(value: Any) -> str | None:
    """Why `value` is not an index or count the hub stores (None when it is one)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return f"is {_kind(value)}, not an integer"
    if not 0 <= value <= MAX_INDEX:
        return f"is {value}, outside 0..{MAX_INDEX}"
    return None


def finite_score(value: Any) -> float | None:
    """A stored score as a float, or None where it is not one the rules above accept (data
    stored before a rule existed is shown as missing, never trusted)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return float(value) if abs(value) <= MAX_ABS_SCORE else None


def _record_fields(record: dict[str, Any]) -> list[tuple[str, Any, str]]:
    """(where, value, kind) of every number in a sample the hub stores or aggregates."""
    fields: list[tuple[str, Any, str]] = [("example_index", record.get("example_index"), "index")]
    if record.get("rollout_index") is not None:
        fields.append(("rollout_index", record["rollout_index"], "index"))
    if record.get("reward") is not None:
        fields.append(("reward", record["reward"], "score"))
    for group in ("rewards", "metrics"):
        values = record.get(group)
        if isinstance(values, dict):
            fields.extend(
                (f"{group}.{name}", v, "score") for name, v in values.items() if v is not None
            )
    usage = record.get("usage")
    if isinstance(usage, dict):
        for name in ("prompt_tokens", "completion_tokens"):
            if usage.get(name) is not None:
                fields.append((f"usage.{name}", usage[name], "index"))
    return fields


def check_record(record: dict[str, Any]) -> None:
    """Every score and index of one sample, strictly typed and bounded; the IntegrityError
    names the field (`rewards.x is a string ("1.7e308"), not a number: …`)."""
    if "example_index" not in record:
        return  # the record validator names the missing field
    for group in ("rewards", "metrics"):
        values = record.get(group)
        if isinstance(values, dict):
            if len(values) > MAX_SCORES_PER_SAMPLE:
                raise IntegrityError(
                    f"{group} has {len(values)} entries; at most {MAX_SCORES_PER_SAMPLE} are kept"
                )
            for name in values:
                if len(name) > MAX_SCORE_NAME:
                    raise IntegrityError(
                        f"{group} has a name of {len(name)} characters; at most {MAX_SCORE_NAME}"
                    )
    for where, value, kind in _record_fields(record):
        problem = score_problem(value) if kind == "score" else index_problem(value)
        if problem is not None:
            raise IntegrityError(f"{where} {problem}")


def check_reward_range(
    records: Sequence[dict[str, Any]], reward_range: tuple[float, float] | None
) -> None:
    """Every scored reward within the environment's declared range."""
    if reward_range is None:
        return
    low, high = reward_range
    for position, record in enumerate(records):
        reward = record.get("reward")
        if record.get("error") is None and reward is not None and not low <= reward <= high:
            raise IntegrityError(
                f"samples[{position}].reward is {reward}, outside the range [{low}, {high}] "
                "this environment declares for its rewards"
            )


def _no_stored_constant(name: str) -> Any:
    raise ValueError(name)


def stored_json(text: str | None, default: Any) -> Any:
    """A JSON column read back for an answer or a page: `default` (a dict or a list) when the
    text does not parse, is of another type, or holds NaN/Infinity (which no answer can carry).
    Rows written by the hub always parse; this keeps one planted or legacy row from taking a
    page down."""
    if not text:
        return default
    try:
        value = json.loads(text, parse_constant=_no_stored_constant)
    except (ValueError, RecursionError):
        return default
    return value if isinstance(value, type(default)) else default


def check_rubric(records: Sequence[dict[str, Any]], rubric: RubricSpec | None) -> None:
    """Every scored sample is what the version's declared rubric can produce: each component
    within its range, no undeclared reward, and the reward their weighted sum (a reward of 9.0
    whose components are all 0 is refused)."""
    if rubric is None:
        return
    for position, record in enumerate(records):
        if record.get("error") is not None or record.get("reward") is None:
            continue
        problem = rubric.sample_problem(
            record["reward"], record.get("rewards") or {}, record.get("metrics") or {}
        )
        if problem is not None:
            raise IntegrityError(f"samples[{position}].{problem}")
