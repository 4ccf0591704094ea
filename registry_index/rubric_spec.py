"""An environment's declared rubric: each reward function's weight and the range its scores
live in, so the hub can check a pushed sample's reward without running any code.

Declared in the environment's pyproject.toml and sent by `prime env push` with the version
(it is part of the release, like its code):

    [tool.prime.rubric]
    correct = { weight = 1.0, range = [0, 1] }
    format = { weight = 0.2, range = [0, 1] }
    length = { weight = 0, range = [0, 100000] }    # a metric: weight 0

A sample of a version with a declaration must then be what that rubric can produce: every
weighted function's score in `rewards`, metrics (if present) in `metrics`, no undeclared
reward, each score within its range, and `reward` the weighted sum (`sample_problem`). The
declaration says what the rubric is; whether the scores are the rubric's own is what the
hub's re-scoring checks (a verified run).
"""

from __future__ import annotations

import math
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, RootModel, field_validator, model_validator

from registry_index.bounds import MAX_ABS_SCORE

MAX_TERMS = 256
# A reward must equal the weighted sum of its parts within this (relative) tolerance: floating
# sums in another order differ in the last bits.
_TOLERANCE = 1e-9


class RubricTerm(BaseModel):
    """One reward function (or metric, weight 0): its weight and the range of its scores."""

    model_config = ConfigDict(extra="forbid")

    weight: float
    range: tuple[float, float]

    @field_validator("weight")
    @classmethod
    def _finite_weight(cls, value: float) -> float:
        if not math.isfinite(value) or abs(value) > 1e6:
            raise ValueError("weight must be a finite number of at most 1e6 in size")
        return value

    @field_validator("range")
    @classmethod
    def _ordered(cls, value: tuple[float, float]) -> tuple[float, float]:
        low, high = value
        if not (math.isfinite(low) and math.isfinite(high)) or low > high:
            raise ValueError("range must be two finite numbers [low, high] with low <= high")
        if max(abs(low), abs(high)) > MAX_ABS_SCORE:
            raise ValueError(f"range must lie within ±{MAX_ABS_SCORE:g}")
        return value

    def contributes(self) -> tuple[float, float]:
        """The least and most `weight × score` can be."""
        ends = (self.weight * self.range[0], self.weight * self.range[1])
        return min(ends), max(ends)


class RubricSpec(RootModel[dict[str, RubricTerm]]):
    """`[tool.prime.rubric]`: function name → `RubricTerm`."""

    root: dict[str, RubricTerm] = Field(min_length=1, max_length=MAX_TERMS)

    @model_validator(mode="after")
    def _names(self) -> Self:
        for name in self.root:
            if not name or len(name) > 128:
                raise ValueError("rubric function names are 1 to 128 characters")
        if not any(term.weight for term in self.root.values()):
            raise ValueError("a rubric needs at least one function of non-zero weight")
        return self

    @property
    def rewards(self) -> dict[str, RubricTerm]:
        return {name: term for name, term in self.root.items() if term.weight != 0}

    @property
    def metrics(self) -> dict[str, RubricTerm]:
        return {name: term for name, term in self.root.items() if term.weight == 0}

    def reward_range(self) -> tuple[float, float]:
        """The least and most a reward can be: the sums of each function's extremes."""
        parts = [term.contributes() for term in self.rewards.values()]
        return math.fsum(p[0] for p in parts), math.fsum(p[1] for p in parts)

    def sample_problem(
        self, reward: float, rewards: dict[str, float], metrics: dict[str, float]
    ) -> str | None:
        """Why a scored sample is not one this rubric can produce (None when it is); the
        message starts with the field (`reward`, `rewards.NAME`, `metrics.NAME`)."""
        for name in rewards:
            if name not in self.rewards:
                return f"rewards.{name} is not a reward function the environment declares"
        for name, term in self.rewards.items():
            if name not in rewards:
                return f"rewards.{name} is missing; the environment's rubric scores it"
            if not term.range[0] <= rewards[name] <= term.range[1]:
                return (
                    f"rewards.{name} is {rewards[name]}, outside the range "
                    f"[{term.range[0]}, {term.range[1]}] the environment declares"
                )
        for name, value in metrics.items():
            metric = self.metrics.get(name)
            if metric is not None and not metric.range[0] <= value <= metric.range[1]:
                return (
                    f"metrics.{name} is {value}, outside the range "
                    f"[{metric.range[0]}, {metric.range[1]}] the environment declares"
                )
        expected = math.fsum(term.weight * rewards[name] for name, term in self.rewards.items())
        scale = max(
            1.0, math.fsum(abs(term.weight * rewards[n]) for n, term in self.rewards.items())
        )
        if abs(reward - expected) > _TOLERANCE * scale:
            return (
                f"reward is {reward}, but the environment's rubric makes it {expected:.12g} "
                "(the weighted sum of rewards)"
            )
        return None


def rubric_from_pyproject(tool_prime: dict[str, Any]) -> RubricSpec | None:
    """The declaration in `[tool.prime]` (its `rubric` table), None when there is none;
    ValueError (pydantic's) for one that is malformed."""
    table = tool_prime.get("rubric")
    if table is None:
        return None
    return RubricSpec.model_validate(table)
