"""The algorithms that turn a task's rollouts into training samples, by name.

`orchestrator.algo.type` (per run, or per stage) names one. An algorithm screens a group
(errors and groups without signal left out) and gives its rollouts samples with advantages or
cross-entropy weights; the trainer never knows which one made them. Built in:
- `grpo` (groups.Screener): the policy samples; advantage = reward − group mean;
- `sft` (traces.py): cross-entropy on given traces (`algo.data`) or a teacher's;
- `rft` (traces.py): a teacher samples, the environment's rubric keeps the best of each group;
- `opd` (opd.py): the policy samples, a frozen teacher scores each token.

A package adds one under the `prime.algorithms` entry-point group,
`my_algo = "my_pkg.algo:make"`, where `make(context: AlgoContext) -> Algorithm`
(algorithm_api.py: `screen`, and `make_group` for an algorithm that samples by itself).
"""

from __future__ import annotations

from functools import cache
from importlib import metadata

from prime_env.environment import Environment
from trainer_bridge.config import ALGORITHM_GROUP, BUILTIN_ALGOS, ConfigError
from trainer_bridge.orchestrator.algorithm_api import (
    AlgoContext,
    Algorithm,
    AlgorithmFactory,
    GroupRequest,
    MakesGroups,
    sample_group,
)
from trainer_bridge.orchestrator.groups import Group, Screener
from trainer_bridge.orchestrator.opd import OnPolicyDistillation
from trainer_bridge.orchestrator.traces import rft, sft


def _grpo(context: AlgoContext) -> Algorithm:
    return Screener(context.weights, context.config)


ALGORITHMS: dict[str, AlgorithmFactory] = dict(
    zip(BUILTIN_ALGOS, (_grpo, sft, rft, OnPolicyDistillation), strict=True)
)
"""The factories of config.BUILTIN_ALGOS (the one list of their names), in its order."""


@cache
def registered() -> dict[str, metadata.EntryPoint]:
    """The algorithms packages register under `prime.algorithms` (a built-in name is never
    replaced)."""
    return {
        ep.name: ep
        for ep in metadata.entry_points(group=ALGORITHM_GROUP)
        if ep.name not in ALGORITHMS
    }


def algorithm_factory(name: str) -> AlgorithmFactory:
    """The factory `algo.type = name` means; ConfigError listing the known ones if none."""
    if name in ALGORITHMS:
        return ALGORITHMS[name]
    entry = registered().get(name)
    if entry is None:
        known = ", ".join([*ALGORITHMS, *sorted(registered())])
        raise ConfigError(
            f"orchestrator.algo.type = {name!r} is not an algorithm: use one of {known}, or "
            f"install a package that registers it under the {ALGORITHM_GROUP!r} entry points"
        )
    try:
        factory = entry.load()
    except Exception as exc:
        raise ConfigError(f"algorithm {name!r} ({entry.value}) cannot be loaded: {exc}") from exc
    if not callable(factory):
        raise ConfigError(f"algorithm {name!r} ({entry.value}) is not callable")
    return factory  # type: ignore[no-any-return]


def make_algorithm(context: AlgoContext) -> Algorithm:
    """The algorithm `context.config.algo.type` names, for a stage."""
    return algorithm_factory(context.config.algo.type)(context)


async def make_group(algorithm: Algorithm, env: Environment, request: GroupRequest) -> Group:
    """The group an algorithm makes for a task: by itself (MakesGroups), or by screening the
    policy's `rollouts_per_example` rollouts of it."""
    if isinstance(algorithm, MakesGroups):
        return await algorithm.make_group(request)
    records = await sample_group(env, request.client, request)
    return algorithm.screen(request.key, request.version, records, request.order)
