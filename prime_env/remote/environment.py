"""An environment served by a worker, behind the environment contract the runner knows.

`RemoteEnvironment` is an `Environment`: its tasks came from the worker, its harness
(`RemoteHarness`) runs each rollout there and its rubric (`RemoteRubric`) reports the worker's
scores. The model calls a rollout makes over there reach this process's model client through
the run's interception server (harnesses/interception), exactly as an agent program's do: each
call is recorded into the rollout's trace graph, token for token with a client that samples
from token ids, so training on a foreign environment sees the same samples as on our own.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from typing import Any

from ..clients.base import ModelClient, SamplingArgs
from ..environment import Environment
from ..errors import InfraError
from ..harnesses.base import COMPLETED, Harness
from ..rubric import Rubric, Scores
from ..state import State
from ..tasks import Task, TaskSet
from .process import Connection, WorkerProcess


class RemoteEnvironment(Environment):
    """An environment whose tasks, rollouts and scores live in a worker process."""

    def __init__(self, worker: WorkerProcess, *, name: str, version: str | None) -> None:
        self.worker = worker
        self._connections: dict[asyncio.AbstractEventLoop, Connection] = {}
        hello = worker.hello
        train = [Task.from_record(t) for t in worker.request("tasks", split="train")]
        evals = [Task.from_record(t) for t in worker.request("tasks", split="eval")]
        rubric = RemoteRubric(self, dict(hello.get("rubric") or {}))
        correctness = hello.get("correctness")
        super().__init__(
            TaskSet(train),
            RemoteHarness(self),
            rubric,
            name=name,
            version=version or hello.get("version"),
            eval_tasks=TaskSet(evals) if [t.id for t in evals] != [t.id for t in train] else None,
            correctness=correctness if correctness in {f.name for f in rubric.funcs} else None,
        )
        self.kind = str(hello.get("kind"))
        self.framework = str(hello.get("framework") or self.kind)

    async def request(self, op: str, **fields: Any) -> Any:
        """A request to the worker from the running event loop (one connection per loop)."""
        loop = asyncio.get_running_loop()
        connection = self._connections.get(loop)
        if connection is None:
            for other in [lp for lp in self._connections if lp.is_closed()]:
                del self._connections[other]
            connection = self._connections[loop] = Connection(self.worker)
        return await connection.request(op, **fields)

    def close(self) -> None:
        """Stop the worker (it also stops when this process exits)."""
        self.worker.stop()

    def __repr__(self) -> str:
        return f"RemoteEnvironment({self.id!r}, {self.framework}, {len(self.tasks)} tasks)"


class RemoteHarness(Harness):
    """Each rollout is one `rollout` request; its model calls come back through the run's
    interception server, with this harness's turn and token limits enforced there."""

    def __init__(self, env: RemoteEnvironment) -> None:
        super().__init__()
        self.env = env
        from ..harnesses.interception.server import SharedServer  # aiohttp: only when used

        self._server = SharedServer()

    async def run(self, client: ModelClient, state: State, sampling: SamplingArgs) -> None:
        from ..harnesses.interception.server import Session

        session = Session(client, state, sampling, self.limit_reached, self.remaining_tokens)
        state["trace"] = session.graph
        key = uuid.uuid4().hex
        state["remote_key"] = key
        async with self._server.session(session) as (server, secret):
            result = await self.env.request(
                "rollout",
                key=key,
                task_id=state.task.id,
                model={"base_url": server.base_url, "api_key": secret, "model": client.model},
                sampling={k: v for k, v in vars(sampling).items() if v not in (None, {})},
            )
        if session.failure is not None:
            raise session.failure  # the model client's own error, as our harnesses raise it
        info = result.get("info")
        if info:
            state["remote_info"] = info
        error = result.get("error")
        if error:
            raise InfraError(str(error.get("type")), str(error.get("message")))
        state["remote_scores"] = result.get("scores") or {}
        state.stop_reason = session.stop_reason or result.get("stop_reason") or COMPLETED


def _reader(name: str, kind: str) -> Any:
    def read(state: State) -> float:
        return float(state["remote_scores"][kind][name])

    read.__name__ = name
    return read


def _group_placeholder(name: str) -> Any:
    def group(states: list[State]) -> list[float]:  # scored by RemoteRubric.score_group
        raise NotImplementedError

    group.__name__ = name
    return group


class RemoteRubric(Rubric):
    """The worker's rubric: its reward and metric names and weights (from its hello, and any
    new name a rollout reports); the scores are the worker's."""

    def __init__(self, env: RemoteEnvironment, spec: dict[str, Any]) -> None:
        super().__init__()
        self.env = env
        self.weights: dict[str, float] = {}
        for name, weight in dict(spec.get("rewards") or {}).items():
            self.add_reward(_reader(name, "rewards"), float(weight), name)
            self.weights[name] = float(weight)
        for name in spec.get("metrics") or []:
            self.add_metric(_reader(name, "metrics"), name)
        for name, weight in dict(spec.get("group_rewards") or {}).items():
            self.add_reward(_group_placeholder(name), float(weight), name)
            self.weights[name] = float(weight)
        self._group = bool(spec.get("group"))

    @property
    def has_group_funcs(self) -> bool:
        return self._group

    async def score_rollout(self, state: State) -> Scores:
        scores = state["remote_scores"]
        self.weights.update({k: float(v) for k, v in (scores.get("weights") or {}).items()})
        return Scores(
            rewards={k: float(v) for k, v in (scores.get("rewards") or {}).items()},
            metrics={k: float(v) for k, v in (scores.get("metrics") or {}).items()},
        )

    async def score_group(self, states: Sequence[State]) -> list[Scores]:
        if not states:
            return []
        scored = await self.env.request("score_group", keys=[s["remote_key"] for s in states])
        return [
            Scores(rewards=dict(s.get("rewards") or {}), metrics=dict(s.get("metrics") or {}))
            for s in scored
        ]

    def reward(self, scores: Scores) -> float:
        return sum(self.weights.get(name, 1.0) * value for name, value in scores.rewards.items())
