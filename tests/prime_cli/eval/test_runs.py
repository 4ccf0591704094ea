"""`prime eval push` names the published environment through the one reference grammar."""

from __future__ import annotations

from pathlib import Path

import pytest

from prime_cli.errors import CliError
from prime_cli.eval.runs import push_run
from prime_env import Environment, Rubric, SingleTurn
from prime_env.clients.model_specs import ModelSpec
from prime_env.eval_run_dir import RunConfig
from prime_env.evaluation import start_run


def one(completion: object, answer: object) -> float:
    return 1.0


def _finished_run(tmp_path: Path, env: str) -> Path:
    """A run directory whose metadata says `completed`, of ENV as given on the command line."""
    environment = Environment([{"question": "q", "answer": "a", "id": "t0"}], SingleTurn(),
                              Rubric([one]), name="adder")  # fmt: skip
    spec = ModelSpec("scripted", "scripted-model", "scripted", "openai", None, None)
    run = start_run(environment, spec, RunConfig(env, None, {}, "scripted", None, 1, 1, {}),
                    tmp_path)  # fmt: skip
    run.dir.update_metadata(status="completed", owner=None)
    return run.directory


@pytest.mark.parametrize("env", ["./adder.py", "adder", "alice/adder/extra"])
def test_a_run_without_a_hub_owner_is_refused_before_anything_is_sent(
    tmp_path: Path, env: str
) -> None:
    directory = _finished_run(tmp_path, env)
    before = (directory / "metadata.json").read_text()
    with pytest.raises(CliError, match="has no hub owner; pass --env OWNER/NAME"):
        push_run(None, directory)  # no hub: it is refused before one is needed
    assert (directory / "metadata.json").read_text() == before
