"""What an algorithm is (orchestrator/algorithms.py names them): it screens a task's rollouts
into a group with samples, or makes its groups itself (a teacher's rollouts, given traces, a
teacher's scores), from an AlgoContext.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from prime_env.clients.base import ModelClient, SamplingArgs
from prime_env.environment import Environment
from prime_env.record import RolloutRecord
from prime_env.runner import run_rollouts
from prime_env.tasks import Task
from trainer_bridge.config import ModelConfig, OrchestratorConfig
from trainer_bridge.inference.teachers import Teachers
from trainer_bridge.orchestrator.groups import Group


class Algorithm(Protocol):
    """Made per stage from the stage's AlgoContext (algorithms.ALGORITHMS, or an entry point).
    The Group it returns carries `samples` (protocol.batches.TrainSample: token ids, loss
    mask, sampler logprobs, an advantage, per-token advantages or ce weights) or `dropped` (a
    reason counted in `drops/*`): the batching, step end, hacking metrics and trainer are the
    same for every algorithm."""

    def screen(self, key: str, version: int, records: list[RolloutRecord], order: int = 0) -> Group:
        """The group of `records` (sampled on policy `version`), with its samples or the
        reason it was dropped."""
        ...


@dataclass(frozen=True)
class GroupRequest:
    """One group to make: the task, the policy's client and sampling, the group's identity."""

    key: str
    version: int
    order: int
    size: int
    """Rollouts per group (the stage's `rollouts_per_example`)."""
    task: Task
    client: ModelClient
    sampling: SamplingArgs
    run_id: str


@runtime_checkable
class MakesGroups(Protocol):
    """An algorithm that makes its groups itself (samples with a teacher, reads traces, scores
    with a teacher) instead of screening the policy's rollouts of the task."""

    async def make_group(self, request: GroupRequest) -> Group: ...


@dataclass
class AlgoContext:
    """What an algorithm is built from: the stage's settings, environment and reward weights,
    the student model, and the run's teachers (loaded when first used)."""

    config: OrchestratorConfig
    weights: dict[str, float]
    env: Environment
    model: ModelConfig
    teachers: Teachers
    tokenizer: Callable[[], Any]
    """The student's tokenizer (loaded on first call): traces are rendered with it."""

    @property
    def options(self) -> dict[str, Any]:
        return self.config.algo.options


async def sample_group(
    env: Environment, client: ModelClient, request: GroupRequest
) -> list[RolloutRecord]:
    """The group's rollouts of its task by `client`, through the environment's harness and
    rubric."""
    return await run_rollouts(
        env,
        client,
        tasks=[request.task],
        r=request.size,
        concurrency=request.size,
        sampling=request.sampling,
        run_id=request.run_id,
    )


AlgorithmFactory = Callable[[AlgoContext], Algorithm]
