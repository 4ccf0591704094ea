"""Evals during training: the env's eval split under policy N, as standard eval runs.

Each is `evals/step_N/` in `prime eval`'s own format (results.jsonl + metadata.json), so
`prime eval push`/`show` read it unchanged; the model is named `BASE@RUN/step_N` and
metadata.json gains a `training` block (run id, step, policy version, config digest). One line
per eval also goes to `evals.jsonl` for plots and the bench, with the CPU-seconds the run's
processes had used when it finished (`cpu_s`).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from prime_env.clients.model_specs import ModelSpec
from prime_env.environment import Environment
from prime_env.eval_run_dir import EvalRunDir, RunConfig, TrainingRef
from prime_env.evaluation import EvalRun, execute, normalize_sampling
from prime_env.run_status import RUNNING
from registry_index.files import read_jsonl, utc_now
from trainer_bridge.config import TrainConfig
from trainer_bridge.inference.base import InferenceBackend
from trainer_bridge.protocol.run_dir import RunDir
from trainer_bridge.usage import tree_cpu_seconds

EVALS_JSONL = "evals.jsonl"


def eval_model_name(config: TrainConfig, run: RunDir, version: int) -> str:
    return f"{config.model.name}@{run.run_id}/step_{version}"


async def evaluate(
    config: TrainConfig,
    run: RunDir,
    env: Environment,
    env_spec: str,
    version: int,
    backend: InferenceBackend,
) -> dict[str, float]:
    """Run the eval split with policy `version` (greedy by default); return `eval/…` means."""
    ev = config.orchestrator.eval
    sampling: dict[str, object] = {
        "max_tokens": ev.max_tokens or config.orchestrator.sampling.max_tokens,
        "temperature": ev.temperature,
    }
    if config.orchestrator.sampling.stop:
        sampling["stop"] = config.orchestrator.sampling.stop
    name = eval_model_name(config, run, version)
    spec = ModelSpec(
        name=name, model=name, provider="prime-train", client="local", base_url=None, key_var=None
    )
    run_config = RunConfig(
        env=env_spec,
        env_version=env.version,
        env_args=config.env.args,
        model=name,
        base_url=None,
        n=ev.num_examples,
        r=ev.rollouts_per_example,
        sampling=normalize_sampling(sampling),
    )
    run_dir = EvalRunDir(run.eval_dir(version))
    run_dir.root.mkdir(parents=True, exist_ok=True)
    eval_run = EvalRun(run_dir, f"{run.run_id}-step{version}", run_config, spec, env, utc_now())
    eval_run.done = run_dir.read_results(repair=True)
    eval_run.write_metadata(None, RUNNING)
    run_dir.update_metadata(
        training=TrainingRef(
            run_id=run.run_id,
            run_dir=str(run.root),
            step=version,
            policy_version=version,
            base_model=config.model.name,
            config_digest=config.digest(),
        )
    )
    summary = await execute(eval_run, backend.client(), concurrency=64)
    row: dict[str, float] = {}
    if summary.reward_mean is not None:
        row["eval/reward"] = summary.reward_mean
    for key, value in {**summary.metrics, **summary.rewards}.items():
        row[f"eval/{key}"] = value
    row["eval/errors"] = float(summary.errors)
    line = {"policy": version, **row, "cpu_s": round(tree_cpu_seconds(), 2), "time": time.time()}
    with (run.root / EVALS_JSONL).open("a") as fh:
        fh.write(json.dumps(line) + "\n")
    return row


def read_evals(root: Path) -> list[dict[str, float]]:
    """The lines of a run's evals.jsonl (a torn last line skipped)."""
    return read_jsonl(root / EVALS_JSONL)
