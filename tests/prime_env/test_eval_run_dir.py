"""One owner of an eval run's metadata.json: every writer merges its part through
`EvalRunDir.update_metadata`, and a reader gets one typed `EvalMetadata` holding them all."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from hub_client.client import HubClient
from prime_cli.eval.runs import push_run
from prime_env import Environment, Rubric, SingleTurn
from prime_env.clients.base import ModelClient
from prime_env.errors import EvalError
from prime_env.eval_run_dir import EvalRunDir, PushRef, TrainingRef
from prime_env.evaluation import execute, resume_run
from tests.hub_server.inproc import InProcessHub
from tests.hub_server.registry.test_rest_api import push
from tests.prime_env.scripted import ScriptedClient
from trainer_bridge.config_loader import build_config
from trainer_bridge.orchestrator.evals import evaluate
from trainer_bridge.protocol.run_dir import RunDir

TASKS = [{"question": f"{i}+{i}", "answer": str(2 * i), "id": f"t{i}"} for i in range(3)]


def exact(completion: Any, answer: Any) -> float:
    return float(completion[-1]["content"] == answer)


def adder() -> Environment:
    return Environment(TASKS, SingleTurn(), Rubric([exact]), name="adder")


def answering() -> ScriptedClient:
    return ScriptedClient(lambda messages, tools: str(2 * int(messages[-1]["content"][0])))


class Answering:
    """The one thing `evaluate` asks of an inference backend: a client of the policy."""

    def client(self) -> ModelClient:
        return answering()


def test_the_run_the_trainer_and_a_push_each_add_their_part(
    tmp_path: Path, inproc_hub: InProcessHub
) -> None:
    """The acceptance of issue 35: an eval run is written (config, status, summary), the trainer
    adds `training`, a push adds `pushes`; one typed metadata reads back all three, and a later
    rewrite by the run (a resume) drops none of them."""
    config = build_config([], [], env_id="alice/adder")
    run = RunDir.new(tmp_path / "outputs", "alice/adder", config.model.name, "r1")
    row = asyncio.run(evaluate(config, run, adder(), "alice/adder", 2, Answering()))  # type: ignore[arg-type]
    assert row["eval/reward"] == 1.0

    token = inproc_hub.add_user("alice")
    push(inproc_hub.client(token), "adder", "0.1.0", owner="alice")
    run_dir = EvalRunDir(run.eval_dir(2))
    with HubClient(inproc_hub.url, token, transport=inproc_hub.transport) as client:
        evaluation_id = push_run(client, run_dir.root)

    meta = run_dir.metadata()
    assert meta.status == "completed" and meta.hub_env == "alice/adder"
    assert meta.summary is not None and meta.summary.rollouts == 3 and meta.avg_reward == 1.0
    assert meta.config is not None and (meta.config.env, meta.config.n) == ("alice/adder", -1)
    assert meta.training == TrainingRef(
        run_id="r1", run_dir=str(run.root), step=2, policy_version=2,
        base_model=config.model.name, config_digest=config.digest(),
    )  # fmt: skip
    assert meta.pushes == [PushRef(hub=inproc_hub.url, evaluation_id=evaluation_id)]
    assert meta.averages() == {"avg_reward": 1.0}

    resumed = resume_run(run_dir.root, adder(), resume_spec(meta.model), meta.config)
    asyncio.run(execute(resumed, answering(), concurrency=1))
    again = run_dir.metadata()
    assert (again.training, again.pushes) == (meta.training, meta.pushes)
    assert again.summary == meta.summary


def resume_spec(name: str) -> Any:
    from prime_env.clients.model_specs import ModelSpec

    return ModelSpec(name, name, "prime-train", "local", None, None)


def test_update_metadata_merges_and_keeps_keys_it_does_not_know(tmp_path: Path) -> None:
    run_dir = EvalRunDir(tmp_path)
    run_dir.update_metadata(run_id="r", model="m", avg_accuracy=0.5, from_the_future={"a": 1})
    meta = run_dir.update_metadata(eval_set={"set_id": "s", "directory": "/sets/s"})
    assert meta.eval_set is not None and meta.eval_set.set_id == "s"
    stored = json.loads(run_dir.metadata_path.read_text())
    assert stored == {
        "schema": "prime.eval/1", "run_id": "r", "model": "m", "avg_accuracy": 0.5,
        "from_the_future": {"a": 1}, "eval_set": {"set_id": "s", "directory": "/sets/s"},
    }  # fmt: skip
    assert meta.averages() == {"avg_accuracy": 0.5}


def test_a_file_that_is_not_run_metadata_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(EvalError, match="is not an eval run directory"):
        EvalRunDir.open(tmp_path)
    (tmp_path / "metadata.json").write_text('{"run_id": "r"}')  # no model
    with pytest.raises(EvalError, match="is not a prime eval metadata file"):
        EvalRunDir(tmp_path).metadata()
    (tmp_path / "metadata.json").write_text("{torn")
    with pytest.raises(EvalError, match="is not a prime eval metadata file"):
        EvalRunDir(tmp_path).metadata()
