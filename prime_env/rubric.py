"""Rubrics: reward functions, zero-weight metrics, group rewards and LLM judges.

Functions receive their arguments by name. Unknown names are rejected when the rubric is
built (not silently defaulted at scoring time, the cause of verifiers#277's always-zero
rewards), so a typo fails in the author's first run with the list of valid names.
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .calling import call_user
from .clients.base import ModelClient, SamplingArgs
from .errors import JudgeError, RubricError
from .parsers import Parser, last_assistant_text
from .state import State

RewardFunc = Callable[..., Any]

SINGULAR = ("prompt", "completion", "answer", "info", "state", "task")
PLURAL = ("prompts", "completions", "answers", "infos", "states", "tasks")


@dataclass
class _Func:
    fn: RewardFunc
    name: str
    weight: float
    group: bool
    params: tuple[str, ...]
    takes_kwargs: bool


@dataclass
class Scores:
    """One rollout's scores: weighted rewards, zero-weight metrics and their weighted sum."""

    rewards: dict[str, float] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)

    def merge(self, other: Scores) -> None:
        self.rewards.update(other.rewards)
        self.metrics.update(other.metrics)


class Rubric:
    """`Rubric(funcs, weights)`: reward = Σ weight × score. A weight of 0 (or `metrics=[...]`)
    makes a function a logged metric. A function whose parameters use the plural names
    (`completions`, `answers`, `states`, …) is a group reward: it gets all rollouts of one task
    and returns one score per rollout.

    Injectable names: prompt, completion, answer, info, state, task, their plurals, `parser`
    (when given) and any extra `objects` (e.g. a judge or a client).
    """

    def __init__(
        self,
        funcs: Sequence[RewardFunc] = (),
        weights: Sequence[float] | None = None,
        *,
        metrics: Sequence[RewardFunc] = (),
        parser: Parser | None = None,
        objects: Mapping[str, Any] | None = None,
    ) -> None:
        if weights is not None and len(weights) != len(funcs):
            raise RubricError(f"{len(funcs)} reward functions but {len(weights)} weights")
        self.parser = parser
        self.objects: dict[str, Any] = dict(objects or {})
        if parser is not None:
            self.objects["parser"] = parser
        self.funcs: list[_Func] = []
        for fn, weight in zip(funcs, weights if weights is not None else [1.0] * len(funcs)):
            self.add_reward(fn, weight)
        for fn in metrics:
            self.add_metric(fn)

    # --- declaration ---------------------------------------------------------------------
    def add_reward(self, fn: RewardFunc, weight: float = 1.0, name: str | None = None) -> None:
        if not math.isfinite(weight):
            raise RubricError(f"weight of {name or _name(fn)} must be a finite number")
        name = name or _name(fn)
        if any(f.name == name for f in self.funcs):
            raise RubricError(
                f"two rubric functions are named {name!r}; pass name= to tell them apart"
            )
        params, takes_kwargs = _params(fn)
        plural = [p for p in params if p in PLURAL]
        singular = [p for p in params if p in SINGULAR]
        if plural and singular:
            raise RubricError(
                f"{name} mixes per-rollout arguments {singular} with group arguments {plural}; "
                "a group reward takes only plural names (completions, answers, states, …)"
            )
        allowed = set(SINGULAR) | set(PLURAL) | set(self.objects)
        sig = inspect.signature(fn)
        for p in params:
            if p not in allowed and sig.parameters[p].default is inspect.Parameter.empty:
                raise RubricError(
                    f"{name} asks for argument {p!r}, which the rubric cannot provide; "
                    f"available: {sorted(allowed)} (add objects={{'{p}': …}} or parser=… to the Rubric)"
                )
        self.funcs.append(_Func(fn, name, float(weight), bool(plural), params, takes_kwargs))

    def add_metric(self, fn: RewardFunc, name: str | None = None) -> None:
        self.add_reward(fn, 0.0, name)

    @property
    def has_group_funcs(self) -> bool:
        return any(f.group for f in self.funcs)

    def reward(self, scores: Scores) -> float:
        """The weighted sum of all reward (non-metric) scores."""
        weights = {f.name: f.weight for f in self.funcs}
        return sum(weights[name] * value for name, value in scores.rewards.items())

    # --- scoring -------------------------------------------------------------------------
    async def score_rollout(self, state: State) -> Scores:
        """Run the per-rollout functions in declaration order (they may share values via state)."""
        scores = Scores()
        values = self._values(state)
        for func in self.funcs:
            if func.group:
                continue
            result = await call_user(func.fn, **self._kwargs(func, values))
            _store(scores, func, _as_score(func.name, result))
        return scores

    async def score_group(self, states: Sequence[State]) -> list[Scores]:
        """Run the group functions over all rollouts of one task; one Scores per state."""
        per_state = [Scores() for _ in states]
        if not states:
            return per_state
        singular = [self._values(s) for s in states]
        values = {plural: [v[single] for v in singular] for single, plural in zip(SINGULAR, PLURAL)}
        values.update(self.objects)
        for func in self.funcs:
            if not func.group:
                continue
            result = await call_user(func.fn, **self._kwargs(func, values))
            if (
                not isinstance(result, Sequence)
                or isinstance(result, str)
                or len(result) != len(states)
            ):
                raise TypeError(
                    f"group reward {func.name} must return a list of {len(states)} scores, got {result!r:.80}"
                )
            for scores, value in zip(per_state, result):
                _store(scores, func, _as_score(func.name, value))
        return per_state

    def _values(self, state: State) -> dict[str, Any]:
        task = state.task
        return {
            "prompt": state.prompt,
            "completion": state.completion,
            "answer": task.answer,
            "info": task.info,
            "state": state,
            "task": task,
            **self.objects,
        }

    @staticmethod
    def _kwargs(func: _Func, values: dict[str, Any]) -> dict[str, Any]:
        if func.takes_kwargs:
            return dict(values)
        return {p: values[p] for p in func.params if p in values}


def _name(fn: RewardFunc) -> str:
    return getattr(fn, "__name__", None) or type(fn).__name__


def _params(fn: RewardFunc) -> tuple[tuple[str, ...], bool]:
    sig = inspect.signature(fn)
    names = tuple(
        n for n, p in sig.parameters.items() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    )
    return names, any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())


def _as_score(name: str, value: Any) -> float:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    raise TypeError(
        f"reward function {name} returned {value!r:.80}; it must return a finite number"
    )


def _store(scores: Scores, func: _Func, value: float) -> None:
    (scores.rewards if func.weight != 0 else scores.metrics)[func.name] = value


JUDGE_PROMPT = """You are grading a model's response. Answer the question about it with a single word: yes or no.

Task given to the model:
{question}

Reference answer (may be empty):
{answer}

Model's response:
{response}

Question: {criterion}
Answer yes or no."""

_YES_NO = re.compile(r"^\W*(yes|no)\b", re.IGNORECASE)


class JudgeRubric(Rubric):
    """Yes/no criteria put to a judge model; each criterion is a reward scoring 1.0 for yes.

    `criteria` is a list of questions or {name: question}. An unreadable judge reply or a
    judge provider failure makes the rollout an error (JudgeError / ModelError), never a 0.
    Other reward functions can ask their own questions via the injected `judge` object:
    `async def f(judge, prompt, completion, answer): return await judge("Is it polite?", prompt, completion, answer)`.
    """

    def __init__(
        self,
        judge: ModelClient,
        criteria: Sequence[str] | Mapping[str, str],
        weights: Sequence[float] | None = None,
        *,
        sampling: SamplingArgs | None = None,
        prompt_template: str = JUDGE_PROMPT,
        funcs: Sequence[RewardFunc] = (),
        metrics: Sequence[RewardFunc] = (),
        parser: Parser | None = None,
    ) -> None:
        super().__init__(parser=parser, objects={"judge": self.ask})
        self.judge = judge
        self.sampling = sampling or SamplingArgs(temperature=0.0)
        self.prompt_template = prompt_template
        named = (
            dict(criteria)
            if isinstance(criteria, Mapping)
            else {f"judge_{i}": q for i, q in enumerate(criteria)}
        )
        if not named:
            raise RubricError("JudgeRubric needs at least one criterion")
        if weights is not None and len(weights) != len(named):
            raise RubricError(f"{len(named)} criteria but {len(weights)} weights")
        for (name, criterion), weight in zip(named.items(), weights or [1.0] * len(named)):
            self.add_reward(self._criterion(criterion), weight, name)
        for fn in funcs:
            self.add_reward(fn)
        for fn in metrics:
            self.add_metric(fn)

    def _criterion(self, criterion: str) -> RewardFunc:
        async def score(
            prompt: list[dict[str, Any]], completion: list[dict[str, Any]], answer: Any
        ) -> float:
            return 1.0 if await self.ask(criterion, prompt, completion, answer) else 0.0

        return score

    async def ask(self, criterion: str, prompt: Any, completion: Any, answer: Any) -> bool:
        """Put one yes/no criterion to the judge about this response."""
        text = self.prompt_template.format(
            question=_last_user(prompt),
            answer="" if answer is None else answer,
            response=last_assistant_text(completion) or "",
            criterion=criterion,
        )
        reply = await self.judge.chat([{"role": "user", "content": text}], sampling=self.sampling)
        content = reply.message.get("content") or ""
        match = _YES_NO.match(content if isinstance(content, str) else "")
        if match is None:
            raise JudgeError(f"judge reply is not yes/no: {content!r:.120}")
        return match.group(1).lower() == "yes"


def _last_user(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    for message in reversed(prompt or []):
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else str(content)
    return ""
