"""The training reward: the env's rubric scores, re-weighted by `orchestrator.reward.weights`."""

from __future__ import annotations

from prime_env.environment import Environment
from prime_env.record import RolloutRecord
from trainer_bridge.config import ConfigError


def reward_weights(env: Environment, overrides: dict[str, float]) -> dict[str, float]:
    """The env's rubric weights by name with `orchestrator.reward.weights` applied; an unknown
    name is a config error (before any model loads)."""
    weights = {f.name: f.weight for f in env.rubric.funcs}
    unknown = sorted(set(overrides) - set(weights))
    if unknown:
        raise ConfigError(
            f"orchestrator.reward.weights names {', '.join(map(repr, unknown))}, which "
            f"{env.id} does not have; its rewards and metrics are {sorted(weights)}"
        )
    return weights | overrides


def training_reward(record: RolloutRecord, weights: dict[str, float]) -> float:
    """Σ weight × score over the record's rewards and metrics (metrics weigh 0 unless re-weighted)."""
    scores = {**record.metrics, **record.rewards}
    return float(sum(weights.get(name, 0.0) * value for name, value in scores.items()))
