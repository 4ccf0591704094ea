"""An environment: tasks × harness × rubric, with a name and version for its records."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .clients.base import ModelClient
from .harnesses import Harness, SingleTurn
from .reference import Reference, ReferenceClient
from .rubric import Rubric
from .tasks import Task, TaskSet, as_taskset


class Environment:
    """What `load_environment(**kwargs)` returns.

    `tasks` is the training set; `eval_tasks` (if given) is what `prime eval run` uses, else
    `tasks`. `name`/`version` are filled in by `prime_env.load` from the installed
    distribution when the author leaves them out. `reference` is the environment's own solver
    and the score it declares (prime_env.reference): `-m reference`, `prime eval validate`.
    `correctness` names the rubric's 0/1 reward or metric that says a rollout solved its task
    (1.0): training reports the share of rollouts rewarded without being correct, the sign of
    a farmed reward.
    """

    def __init__(
        self,
        tasks: TaskSet | Iterable[Task | Mapping[str, Any]],
        harness: Harness | None = None,
        rubric: Rubric | None = None,
        *,
        name: str | None = None,
        version: str | None = None,
        eval_tasks: TaskSet | Iterable[Task | Mapping[str, Any]] | None = None,
        reference: Reference | None = None,
        correctness: str | None = None,
    ) -> None:
        if rubric is None:
            raise TypeError(
                "Environment needs a rubric: Environment(tasks, harness, Rubric([reward_fn])); "
                "an environment without rewards would silently score everything 0"
            )
        if not isinstance(rubric, Rubric):
            raise TypeError(f"rubric must be a prime_env.Rubric, got {type(rubric).__name__}")
        harness = harness if harness is not None else SingleTurn()
        if not isinstance(harness, Harness):
            raise TypeError(f"harness must be a prime_env harness, got {type(harness).__name__}")
        if reference is not None and not isinstance(reference, Reference):
            raise TypeError(
                "reference must be a prime_env.Reference(solve, min_reward=..., mean_reward=...), "
                f"got {type(reference).__name__}"
            )
        names = [f.name for f in rubric.funcs]
        if correctness is not None and correctness not in names:
            raise ValueError(
                f"correctness={correctness!r} is not one of the rubric's rewards or metrics "
                f"({', '.join(names)})"
            )
        self.correctness = correctness
        self.tasks = as_taskset(tasks)
        self.eval_tasks = as_taskset(eval_tasks) if eval_tasks is not None else None
        self.harness = harness
        self.rubric = rubric
        self.reference = reference
        self.name = name
        self.version = version
        self.env_args: dict[str, Any] = {}

    def get_eval_tasks(self) -> TaskSet:
        return self.eval_tasks if self.eval_tasks is not None else self.tasks

    def reference_client(self) -> ModelClient:
        """A client that plays this environment's reference policy (`-m reference`);
        ModelConfigError when it ships none."""
        return ReferenceClient(self)

    @property
    def id(self) -> str:
        """`owner/name@version` as far as known (e.g. "wordle@0.1.0" for a locally installed env)."""
        name = self.name or "unnamed"
        return f"{name}@{self.version}" if self.version else name

    def __repr__(self) -> str:
        return (
            f"Environment({self.id!r}, {len(self.tasks)} tasks, "
            f"{type(self.harness).__name__}, {len(self.rubric.funcs)} rubric functions)"
        )
