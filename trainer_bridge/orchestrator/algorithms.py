"""The algorithms that turn a finished group of rollouts into training samples.

`orchestrator.algo.type` (per run, or per stage) names one. An algorithm screens a group
(errors and groups without signal left out) and gives its rollouts samples with advantages;
the trainer never knows which one made them. `grpo` is groups.Screener: advantage = reward −
group mean (÷ std with `advantage.std_norm`). A new algorithm is a class with `screen` added
to ALGORITHMS and its name to config.AlgoType.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from prime_env.record import RolloutRecord
from trainer_bridge.config import OrchestratorConfig
from trainer_bridge.orchestrator.groups import Group, Screener


class Algorithm(Protocol):
    """Made per stage from the stage's reward weights and OrchestratorConfig (ALGORITHMS).
    The Group it returns carries `samples` (protocol.batches.TrainSample: token ids, loss
    mask, sampler logprobs, advantage) or `dropped` (a reason counted in `drops/*`): the
    batching, step end, hacking metrics and trainer are the same for every algorithm."""

    def screen(self, key: str, version: int, records: list[RolloutRecord], order: int = 0) -> Group:
        """The group of `records` (sampled on policy `version`), with its samples or the
        reason it was dropped."""
        ...


ALGORITHMS: dict[str, Callable[[dict[str, float], OrchestratorConfig], Algorithm]] = {
    "grpo": Screener,
}


def make_algorithm(config: OrchestratorConfig, weights: dict[str, float]) -> Algorithm:
    """The algorithm `config.algo.type` names, for a stage's settings and reward weights."""
    return ALGORITHMS[config.algo.type](weights, config)
