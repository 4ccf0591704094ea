"""Evaluation runs: an environment loaded, a run started or resumed and executed to its end.

The run directory and its files (results.jsonl, metadata.json) are prime_env.eval_run_dir's;
here a run writes its own part of the metadata (configuration, status, summary) through it.

This is library code (the `prime eval` CLI is a thin shell around it) so notebooks, the trainer
and scripts get the same layout and resume rules.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from registry_index.files import utc_now, write_lines_atomic
from registry_index.resolve import parse_env_id

from .clients.base import ModelClient, SamplingArgs
from .clients.model_paths import looks_like_path
from .clients.model_specs import ModelSpec
from .environment import Environment
from .errors import DatasetError, EnvironmentNotFound, EvalError
from .eval_run_dir import EvalMetadata, EvalRunDir, RunConfig
from .loading import load
from .parallel import ClientFactory, run_in_processes
from .process.gc_tuning import rollout_gc
from .record import RolloutRecord
from .run_status import (
    COMPLETED,
    FAILED,
    INTERRUPTED,
    RUNNING,
    describe_owner,
    held_by_another,
    status_fields,
)
from .runner import stream_rollouts
from .summary import Summary, SummaryBuilder

# ------------------------------------------------------------------ environments


def load_env(
    spec: str,
    env_args: dict[str, Any],
    install: Callable[[str], None] | None = None,
) -> Environment:
    """Load ENV given as a .py file, an environment project directory, an installed name, or
    `owner/name[@version]` (installed through `install` when missing or at another version).

    Wrong `env_args` become an EvalError: an unknown name lists the arguments load_environment
    accepts, a value it refuses (its ValueError) is quoted with the environment's name."""
    try:
        return _load_env(spec, env_args, install)
    except TypeError as exc:
        raise EvalError(str(exc)) from None
    except DatasetError:
        raise  # says which dataset and what to do
    except ValueError as exc:  # load_environment refused an argument's value
        raise EvalError(f"{spec}: {exc}") from None


def _load_env(
    spec: str,
    env_args: dict[str, Any],
    install: Callable[[str], None] | None,
) -> Environment:
    path = Path(spec).expanduser()
    spelled_as_path = looks_like_path(spec) or path.suffix == ".py"
    if spelled_as_path or path.is_dir() or os.sep in spec and path.exists():
        if not path.exists():
            raise EvalError(
                f"environment path {spec} does not exist; ENV is a .py file, an environment "
                "project directory, an installed name or OWNER/NAME[@VERSION]"
            )
        try:
            return load(str(path), **env_args)
        except EnvironmentNotFound as exc:
            raise EvalError(str(exc)) from None
    try:
        owner, name, version = parse_env_id(spec)
    except ValueError as exc:
        raise EvalError(str(exc)) from None
    try:
        env = load(spec, **env_args)
    except EnvironmentNotFound:
        if owner is None or install is None:
            raise
        install(spec)
        importlib.invalidate_caches()
        return load(spec, **env_args)
    if version and owner and install is not None and env.version and env.version != version:
        install(spec)
        raise EvalError(
            f"installed {owner}/{name} {version} (was {env.version}); run the command again to "
            "evaluate it (a Python process cannot reload an imported environment)"
        )
    return env


# ------------------------------------------------------------------ configuration


def sampling_to_json(sampling: SamplingArgs) -> dict[str, Any]:
    """The settings that were set. `v is not False`, not `v not in (None, False)`: 0.0 == False,
    and a temperature of 0 (greedy) is a setting, not an absence."""
    data = {
        k: v for k, v in vars(sampling).items() if v is not None and v is not False and k != "extra"
    }
    data.update(sampling.extra)
    return data


def normalize_sampling(data: dict[str, Any]) -> dict[str, Any]:
    """Sampling settings as stored in a run config: known keys checked, extras kept."""
    known: dict[str, type | tuple[type, ...]] = {
        "max_tokens": int,
        "temperature": (int, float),
        "top_p": (int, float),
        "stop": list,
        "seed": int,
        "logprobs": bool,
    }
    for key, kind in known.items():
        if data.get(key) is not None and not isinstance(data[key], kind):
            raise EvalError(f"sampling argument {key}={data[key]!r} has the wrong type")
    return sampling_to_json(sampling_from_json(data))


def sampling_from_json(data: dict[str, Any]) -> SamplingArgs:
    known = {"max_tokens", "temperature", "top_p", "stop", "seed", "logprobs"}
    return SamplingArgs(
        **{k: v for k, v in data.items() if k in known},
        extra={k: v for k, v in data.items() if k not in known},
    )


def hub_slug(spec: str) -> str | None:
    """`owner/name` when ENV was given as a hub id (what results are pushed against), else None."""
    if spec.endswith(".py") or Path(spec).exists():
        return None
    try:
        owner, name, _ = parse_env_id(spec)
    except ValueError:
        return None
    return f"{owner}/{name}" if owner else None


# ------------------------------------------------------------------ runs


@dataclass
class EvalRun:
    """One (environment, model) run being made: its directory, configuration and progress."""

    dir: EvalRunDir
    run_id: str
    config: RunConfig
    spec: ModelSpec
    env: Environment
    started_at: str
    done: list[RolloutRecord] = field(default_factory=list)
    served_models: set[str] = field(default_factory=set)
    """The names the server answered under (records' `served_model`), for metadata.json."""
    retried: int = 0
    """Errored rollouts a resume dropped to run them again (`resume_run(retry_errors=True)`)."""

    @property
    def directory(self) -> Path:
        return self.dir.root

    @property
    def results_path(self) -> Path:
        return self.dir.results_path

    @property
    def total(self) -> int:
        return len(self.env.get_eval_tasks().head(self.config.n)) * self.config.r

    def cost(self, summary: Summary) -> float | None:
        """The run's cost in USD: the policy's tokens at its price, plus a simulated user's
        model (None when a price that counts is unknown)."""
        cost = self.spec.cost(summary.prompt_tokens, summary.completion_tokens)
        if not (summary.user_prompt_tokens or summary.user_completion_tokens):
            return cost
        if cost is None or summary.user_cost_usd is None:
            return None
        return cost + summary.user_cost_usd

    def write_metadata(
        self, summary: Summary | None, status: str, error: str | None = None
    ) -> EvalMetadata:
        """The run's own part of metadata.json: config, model (never a key), times, status
        (`running` with this process as its owner, prime_env.run_status) and the summary,
        its means again in verifiers' names. Other parties' parts stay (EvalRunDir)."""
        fields: dict[str, Any] = {
            "run_id": self.run_id,
            **status_fields(status),
            "error": error,
            "env": self.env.name,
            "env_id": self.env.id,
            "env_version": self.env.version,
            "hub_env": hub_slug(self.config.env),
            "env_args": self.config.env_args,
            "model": self.spec.name,
            "served_model": ", ".join(sorted(self.served_models)) or None,
            "provider": self.spec.provider,
            "base_url": self.spec.base_url,
            "model_info": self.spec.describe(),
            "sampling_args": self.config.sampling,
            "num_examples": self.config.n,
            "rollouts_per_example": self.config.r,
            "config": self.config,
            "started_at": self.started_at,
            "ended_at": utc_now() if status == COMPLETED else None,
        }
        if summary is not None:
            cost = self.cost(summary)
            fields["summary"] = summary.model_dump() | {"cost_usd": cost}
            fields["avg_reward"] = summary.reward_mean
            fields.update({f"avg_{name}": value for name, value in summary.metrics.items()})
            fields["pass_at_k"] = summary.pass_at_k
        else:  # a resumed run's earlier summary no longer describes it
            fields.update(summary=None, avg_reward=None, pass_at_k=None)
        return self.dir.update_metadata(**fields)


def start_run(env: Environment, spec: ModelSpec, config: RunConfig, output_root: Path) -> EvalRun:
    run_id = uuid.uuid4().hex[:8]
    run = EvalRun(
        EvalRunDir.new(output_root, env.name, spec.name, run_id),
        run_id,
        config,
        spec,
        env,
        utc_now(),
    )
    run.write_metadata(None, RUNNING)
    run.results_path.touch()
    return run


def resume_run(
    directory: Path,
    env: Environment,
    spec: ModelSpec,
    config: RunConfig,
    *,
    retry_errors: bool = False,
) -> EvalRun:
    """Reopen a run: refuse if anything that defines it differs; drop a torn last line,
    with `retry_errors` the errored rollouts (run again, as Inspect's eval-retry does; counted
    in `retried`) and, for environments with group rewards, incomplete groups (they are rerun
    whole). Nothing is dropped from a run the resume refuses."""
    run_dir = EvalRunDir.open(directory)
    differences = config.differences(run_dir.config())
    if differences:
        raise EvalError(
            f"refusing to resume {directory}: it was run with different settings ("
            + "; ".join(differences)
            + "). Start a new run instead (drop --resume)."
        )
    meta = run_dir.metadata()
    if held_by_another(meta.to_json()):
        raise EvalError(
            f"refusing to resume {directory}: it is still running ({describe_owner(meta.to_json())}); "
            "let it finish, or stop it first"
        )
    run = EvalRun(run_dir, meta.run_id, config, spec, env, meta.started_at or utc_now())
    records = kept = run_dir.read_results(repair=True)
    if retry_errors:
        kept = [rec for rec in records if rec.error is None]
        run.retried = len(records) - len(kept)
    if env.rubric.has_group_funcs:
        sizes: dict[int, int] = {}
        for rec in kept:
            sizes[rec.example_index] = sizes.get(rec.example_index, 0) + 1
        kept = [rec for rec in kept if sizes[rec.example_index] == config.r]
    if len(kept) != len(records):
        write_lines_atomic(run.results_path, (rec.to_json() for rec in kept))
    run.done = kept
    run.write_metadata(None, RUNNING)
    return run


async def execute(
    run: EvalRun,
    client: ModelClient,
    *,
    concurrency: int,
    on_record: Callable[[RolloutRecord], None] | None = None,
    workers: int = 1,
    client_factory: ClientFactory | None = None,
) -> Summary:
    """Run what is missing of `run`, appending each record to results.jsonl as it completes;
    return the summary over the whole run (earlier records included).

    Records are not kept: each is written, counted into a running summary and dropped, so a
    run's memory does not grow with its size. With `workers` > 1 the rollouts run in that many
    forked processes (prime_env.parallel), each making its client with
    `client_factory`; this process then only writes their lines and keeps the summary (`client`
    is not used).

    A run that does not finish says so in metadata.json: `interrupted` when cancelled (Ctrl-C,
    SIGTERM, the train run it belongs to stopping), `failed` with the error otherwise; both are
    finished by a resume. A SIGKILL writes nothing; readers see it (`EvalRunDir.metadata`).
    """
    try:
        result = await _run_missing(run, client, concurrency, on_record, workers, client_factory)
    except (asyncio.CancelledError, KeyboardInterrupt, SystemExit):
        run.write_metadata(None, INTERRUPTED, "interrupted before its last rollout")
        raise
    except Exception as exc:
        run.write_metadata(None, FAILED, f"{type(exc).__name__}: {exc}")
        raise
    run.write_metadata(result, COMPLETED)
    return result


async def _run_missing(
    run: EvalRun,
    client: ModelClient,
    concurrency: int,
    on_record: Callable[[RolloutRecord], None] | None,
    workers: int,
    client_factory: ClientFactory | None,
) -> Summary:
    sampling = sampling_from_json(run.config.sampling)
    summary = SummaryBuilder()
    for rec in run.done:
        summary.add(rec)
        if rec.served_model:
            run.served_models.add(rec.served_model)
    skip = {rec.key for rec in run.done}
    fh: IO[bytes]
    with run.results_path.open("ab") as fh, rollout_gc(concurrency):

        def keep(record: RolloutRecord) -> None:
            summary.add(record)
            if record.served_model:
                run.served_models.add(record.served_model)
            if on_record is not None:
                on_record(record)

        def write(record: RolloutRecord) -> None:
            fh.write(record.to_json().encode() + b"\n")
            fh.flush()
            keep(record)

        def write_line(line: bytes) -> None:
            fh.write(line + b"\n")
            fh.flush()
            keep(RolloutRecord.model_validate_json(line))

        if workers > 1:
            if client_factory is None:
                raise EvalError("workers > 1 needs a client_factory (each process makes its own)")
            await run_in_processes(
                run.env,
                client_factory,
                workers=workers,
                on_line=write_line,
                n=run.config.n,
                r=run.config.r,
                concurrency=concurrency,
                sampling=sampling,
                skip=skip,
                run_id=run.run_id,
            )
        else:
            await stream_rollouts(
                run.env,
                client,
                on_record=write,
                n=run.config.n,
                r=run.config.r,
                concurrency=concurrency,
                sampling=sampling,
                skip=skip,
                run_id=run.run_id,
            )
    return summary.summary()
