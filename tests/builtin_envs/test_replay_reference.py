"""`prime eval replay` of each built-in's reference run gives back exactly its rewards, rewards
parts and metrics: the state its rubric reads (wordle's `solved`, wiki-search's `tool_calls`,
twenty-questions' simulated turns) is saved in the record and restored, never defaulted.
A record without that state (written before it was saved) replays as a `scoring_error` that
names the key, not as a score computed from a default."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from prime_env import Environment, ReferenceClient
from prime_env.clients.model_specs import resolve_model
from prime_env.eval_run_dir import RESULTS, RunConfig, read_results
from prime_env.evaluation import execute, start_run
from prime_env.replay import replay_run
from prime_env.run_status import COMPLETED

pytestmark = pytest.mark.timeout(600)

BUILTINS: dict[str, tuple[str, dict[str, Any], int | None]] = {
    # module, load_environment args, how many eval tasks (None: all of them)
    "wordle": ("wordle", {}, 30),  # 0.4 s a game: its solver is the slow part
    "wiki-search": ("wiki_search", {"num_eval_examples": 40}, None),
    "twenty-questions": ("twenty_questions", {}, None),
    "arithmetic": ("arithmetic", {}, None),
    "reverse-text": ("reverse_text", {}, None),
    "python-code": ("python_code", {"backend": "local"}, None),
}


def _load(name: str) -> Environment:
    module, args, _ = BUILTINS[name]
    env: Environment = __import__(module).load_environment(**args)
    return env


async def _reference_run(env: Environment, name: str, out: Path, n: int | None = None) -> Path:
    _, args, default = BUILTINS[name]
    n = n or default
    config = RunConfig(
        env=name,
        env_version=env.version,
        env_args=args,
        model="reference",
        base_url=None,
        n=-1 if n is None else n,
        r=1,
        sampling={},
    )
    run = start_run(env, resolve_model("reference"), config, out)
    await execute(run, ReferenceClient(env), concurrency=4)
    return run.directory


def _scores(directory: Path) -> list[tuple[Any, ...]]:
    return [
        (r.key, r.reward, r.rewards, r.metrics, r.error)
        for r in sorted(read_results(directory / RESULTS), key=lambda r: r.key)
    ]


@pytest.mark.parametrize("name", sorted(BUILTINS))
async def test_the_reference_run_replays_to_exactly_its_rewards(name: str, tmp_path: Path) -> None:
    env = _load(name)
    source = await _reference_run(env, name, tmp_path / "outputs")
    before = _scores(source)
    assert before and all(error is None for *_, error in before)
    run, summary = await replay_run(source, env, name, tmp_path / "outputs")
    assert run.directory != source and summary.errors == 0
    assert run.cost(summary) == 0.0  # no model was called
    assert _scores(run.directory) == before
    meta = json.loads((run.directory / "metadata.json").read_text())
    assert meta["status"] == COMPLETED and meta["replay_of"]["directory"] == str(source.resolve())


@pytest.mark.parametrize(
    ("name", "key"),
    [("wordle", "solved"), ("wiki-search", "tool_calls")],
)
async def test_a_record_without_its_state_is_a_scoring_error_naming_the_key(
    name: str, key: str, tmp_path: Path
) -> None:
    env = _load(name)
    source = await _reference_run(env, name, tmp_path / "outputs", n=8)
    results = source / RESULTS
    old = [json.loads(line) for line in results.read_text().splitlines()]
    assert all(key in row["state"]["values"] for row in old)
    for row in old:
        del row["state"]  # a record written before rollout state was saved
    results.write_text("".join(json.dumps(row) + "\n" for row in old))
    run, summary = await replay_run(source, env, name, tmp_path / "outputs")
    records = read_results(run.directory / RESULTS)
    assert summary.errors == len(records) and summary.reward_mean is None
    for record in records:
        assert record.reward is None and record.error is not None
        assert record.error.type == "scoring_error"
        assert f"state[{key!r}]" in record.error.message
        assert "rerun the eval" in record.error.message
