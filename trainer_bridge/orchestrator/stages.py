"""The run's stages as the orchestrator runs them: each stage's environment (its data), reward
weights, algorithm, sampling and batch shape, from `TrainConfig.stage_plan()`.

A stage whose `orchestrator.env.args` differ from the run's trains on the environment loaded
with those args (`load_env`); evals always use the run's own environment.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from prime_env.clients.base import SamplingArgs
from prime_env.environment import Environment
from trainer_bridge.config import ConfigError, OrchestratorConfig, Stage, TrainConfig, stage_at
from trainer_bridge.inference.teachers import Teachers
from trainer_bridge.orchestrator.algorithm_api import AlgoContext
from trainer_bridge.orchestrator.algorithms import Algorithm, make_algorithm
from trainer_bridge.orchestrator.rewards import reward_weights

EnvLoader = Callable[[dict[str, Any]], Environment]


@dataclass
class StageRun:
    stage: Stage
    env: Environment
    weights: dict[str, float]
    algorithm: Algorithm
    sampling: SamplingArgs

    @property
    def oc(self) -> OrchestratorConfig:
        return self.stage.config.orchestrator

    @property
    def index(self) -> int:
        return self.stage.index


def stage_runs(
    config: TrainConfig,
    env: Environment,
    load_env: EnvLoader | None = None,
    teachers: Teachers | None = None,
) -> list[StageRun]:
    """One StageRun per stage that runs; an unknown reward name or algorithm, a teacher that
    cannot serve its algorithm, unreadable data or an empty split is a ConfigError naming the
    stage. Nothing loads a model here (teachers and the tokenizer load when first used)."""
    teachers = teachers or Teachers(config.model)
    tokenizer = _student_tokenizer(config.model.name)
    runs: list[StageRun] = []
    loaded: dict[str, Environment] = {repr(sorted(config.env.args.items())): env}
    for stage in config.stage_plan():
        oc = stage.config.orchestrator
        args = stage.config.env.args
        key = repr(sorted(args.items()))
        if key not in loaded:
            if load_env is None:
                raise ConfigError(
                    f"stage {stage.name!r} trains on other env args ({args}) but no loader "
                    "was given for them"
                )
            loaded[key] = load_env(args)
        stage_env = loaded[key]
        if len(stage_env.tasks) == 0:
            raise ConfigError(
                f"stage {stage.name!r}: {stage_env.id} with args {args} has no train tasks"
            )
        weights = reward_weights(stage_env, oc.reward.weights)
        sampling = SamplingArgs(
            max_tokens=oc.sampling.max_tokens,
            temperature=oc.sampling.temperature,
            top_p=1.0,
            stop=oc.sampling.stop,
            logprobs=True,
        )
        context = AlgoContext(oc, weights, stage_env, config.model, teachers, tokenizer)
        try:
            algorithm = make_algorithm(context)
        except ConfigError as exc:
            where = f"stage {stage.name!r}: " if config.stages else ""
            raise ConfigError(f"{where}{exc}") from None
        runs.append(StageRun(stage, stage_env, weights, algorithm, sampling))
    return runs


def _student_tokenizer(name: str) -> Callable[[], Any]:
    """The student's tokenizer, loaded on the first call (traces are rendered with it)."""

    @cache
    def load() -> Any:
        from local_model.models import load_tokenizer

        return load_tokenizer(name)

    return load


def run_at(runs: list[StageRun], step: int) -> StageRun:
    """The StageRun step `step` belongs to (the last one past the end)."""
    stage = stage_at([r.stage for r in runs], step)
    return runs[[r.stage.index for r in runs].index(stage.index)]
