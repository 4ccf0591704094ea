"""`prime eval run ENV1 ENV2 … -m A -m B`: an eval set, every environment × every model.

Each cell is a standard eval run inside one set directory (`prime_env.eval_sets`: set.json and
the layout). Cells run one after another, each with the usual live line; a cell whose run
crashed, or that holds errored rollouts (infrastructure failures), is retried up to `--retries`
times: its finished rollouts are kept and only the failed ones run again (Inspect's eval-set
retries). With `--push` each cell is pushed as soon as it is done; a cell of errors only is
never pushed. `prime eval run --resume SETDIR` continues a stopped set: finished cells are kept,
the others resumed or started. At the end one table: mean ± standard error per cell.
"""

from __future__ import annotations

import asyncio
import json
import signal
from contextlib import ExitStack
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import click
from rich.progress import Progress
from rich.table import Table

from hub_client.client import HubClient
from hub_client.install import ensure_installed
from prime_cli.errors import CliError
from prime_cli.eval.live import progress_display, run_all
from prime_cli.eval.runs import open_hub, push_run
from prime_cli.eval.tables import fmt
from prime_cli.feedback import console_feedback
from prime_cli.messages import output_console, say
from prime_env.clients.model_specs import ModelSpec
from prime_env.clients.retry import RetryPolicy
from prime_env.environment import Environment
from prime_env.eval_run_dir import EvalRunDir, EvalSetRef, RunConfig
from prime_env.eval_sets import (
    COMPLETED,
    FAILED,
    PENDING,
    Cell,
    EvalSet,
    SetConfig,
    drop_errored,
    new_set,
    read_set,
)
from prime_env.evaluation import EvalError, load_env, resume_run, start_run
from prime_env.process import event_loop
from prime_env.summary import Summary

console = output_console()
err_console = output_console(stderr=True)


@dataclass(frozen=True)
class SetRequest:
    """Everything `prime eval run` parsed for a set (specs resolved, in `config.models` order)."""

    config: SetConfig
    specs: list[ModelSpec]
    output_dir: Path
    resume_dir: Path | None
    concurrency: int
    workers: int
    stream: bool
    policy: RetryPolicy
    retries: int
    push: bool
    public: bool
    output: str


def run_set(request: SetRequest) -> None:
    eval_set = _open(request)
    config = eval_set.config
    say(
        err_console,
        f"eval set {eval_set.root}: {len(config.envs)} environments × {len(config.models)} models",
    )
    progress = progress_display(err_console, disable=request.output == "json")
    summaries: dict[tuple[str, str], Summary] = {}
    try:
        with ExitStack() as stack:
            hub = stack.enter_context(open_hub(err_console)) if request.push else None
            stack.enter_context(progress)
            for env_spec in config.envs:
                env: Environment | None = None
                for spec in request.specs:
                    cell = eval_set.cell(env_spec, spec.name)
                    if cell.status == COMPLETED:
                        summary = _finished_summary(eval_set, cell)
                    else:
                        env = env or load_env(
                            env_spec,
                            config.env_args,
                            install=partial(
                                ensure_installed, feedback=console_feedback(err_console)
                            ),
                        )
                        summary = _run_cell(request, eval_set, cell, env, spec, progress)
                    if summary is not None:
                        summaries[(env_spec, spec.name)] = summary
                    if hub is not None and cell.status == COMPLETED:
                        _push(hub, eval_set, cell, request.public)
    except (KeyboardInterrupt, asyncio.CancelledError) as exc:
        raise CliError(
            "interrupted; finished cells and rollouts are saved. Continue with: "
            f"prime eval run --resume {eval_set.root}",
            status=1 if isinstance(exc, KeyboardInterrupt) else 128 + signal.SIGTERM,
        ) from None
    _report(request, eval_set, summaries)


def _open(request: SetRequest) -> EvalSet:
    if request.resume_dir is None:
        return new_set(request.output_dir, request.config)
    eval_set = read_set(request.resume_dir)
    differences = request.config.differences(eval_set.config)
    if differences:
        raise EvalError(
            f"refusing to resume the set {request.resume_dir}: it was run with different "
            f"settings ({'; '.join(differences)}). Start a new set instead (drop --resume)."
        )
    for cell in eval_set.cells:
        if cell.status == FAILED:  # resumed after a fix: it gets its retries again
            cell.status = PENDING
    return eval_set


def _run_cell(
    request: SetRequest,
    eval_set: EvalSet,
    cell: Cell,
    env: Environment,
    spec: ModelSpec,
    progress: Progress,
) -> Summary | None:
    """Run (or resume) one cell, retrying a crash or errored rollouts; returns its summary
    (None when every attempt crashed) and leaves the cell's status in set.json."""
    config = eval_set.config
    run_config = RunConfig(
        env=cell.env,
        env_version=env.version,
        env_args=config.env_args,
        model=spec.name,
        base_url=config.base_url,
        n=config.n,
        r=config.r,
        sampling=config.sampling,
        api=config.api,
    )
    summary: Summary | None = None
    for attempt in range(request.retries + 1):
        # made before the cell's run directory is: a client that cannot be made (-m reference
        # of an environment without one) leaves nothing on disk
        factory = partial(spec.create_client, stream=request.stream, policy=request.policy, env=env)
        client = factory()
        directory = eval_set.run_dir(cell)
        if directory is None:
            run = start_run(env, spec, run_config, eval_set.root)
            cell.directory = str(run.directory.relative_to(eval_set.root))
        else:
            run = resume_run(directory, env, spec, run_config)
        run.dir.update_metadata(
            eval_set=EvalSetRef(set_id=eval_set.set_id, directory=str(eval_set.root))
        )
        cell.attempts += 1
        eval_set.save()
        try:
            [outcome] = event_loop.run(
                run_all(
                    [(run, client, factory)],
                    request.concurrency,
                    request.workers,
                    progress,
                    label=lambda _: f"{cell.env} × {cell.model}",
                )
            )
        except Exception as exc:  # noqa: BLE001 - a crashed cell is retried, then reported
            summary, cell.error = None, f"{type(exc).__name__}: {exc}"
        else:
            summary = outcome.summary
            cell.error = _errors_text(summary) if summary.errors else None
        if cell.error is None or attempt == request.retries:
            break
        dropped = drop_errored(run.directory) if summary is not None else 0
        say(
            err_console,
            f"retrying {cell.env} × {cell.model} ({cell.error}"
            + (f"; {dropped} errored rollouts run again" if dropped else "")
            + f"), attempt {attempt + 2} of {request.retries + 1}",
        )
    cell.status = COMPLETED if summary is not None and summary.scored else FAILED
    if summary is not None and not summary.scored:
        cell.error = f"every rollout failed ({_errors_text(summary)})"
    eval_set.save()
    return summary


def _errors_text(summary: Summary) -> str:
    kinds = ", ".join(f"{kind}: {count}" for kind, count in summary.error_types.items())
    return f"{summary.errors} errored rollouts ({kinds})"


def _finished_summary(eval_set: EvalSet, cell: Cell) -> Summary | None:
    directory = eval_set.run_dir(cell)
    if directory is None:
        return None
    stored = EvalRunDir(directory).metadata().summary  # the run's summary, its cost beside it
    return (
        None if stored is None else Summary.model_validate(stored.model_dump(exclude={"cost_usd"}))
    )


def _push(hub: HubClient, eval_set: EvalSet, cell: Cell, public: bool) -> None:
    directory = eval_set.run_dir(cell)
    if cell.evaluation_id is not None or directory is None:
        return
    cell.evaluation_id = push_run(hub, directory, public=public)
    eval_set.save()
    say(err_console, f"pushed {cell.env} × {cell.model} as evaluation {cell.evaluation_id}")


def _cell_text(cell: Cell, summary: Summary | None) -> str:
    if cell.status == FAILED or summary is None:
        return "failed"
    text = f"{fmt(summary.reward_mean)} ± {fmt(summary.reward_stderr)}"
    return text + (f" ({summary.errors} errors)" if summary.errors else "")


def _report(
    request: SetRequest, eval_set: EvalSet, summaries: dict[tuple[str, str], Summary]
) -> None:
    config = eval_set.config
    failed = [c for c in eval_set.cells if c.status != COMPLETED]
    if request.output == "json":
        rows: list[dict[str, Any]] = []
        for cell in eval_set.cells:
            summary = summaries.get((cell.env, cell.model))
            rows.append(
                {
                    "env": cell.env,
                    "model": cell.model,
                    "status": cell.status,
                    "attempts": cell.attempts,
                    "error": cell.error,
                    "directory": str(eval_set.run_dir(cell)) if cell.directory else None,
                    "summary": None if summary is None else summary.model_dump(),
                    "evaluation_id": cell.evaluation_id,
                }
            )
        click.echo(
            json.dumps(
                {"set_id": eval_set.set_id, "directory": str(eval_set.root), "cells": rows},
                indent=2,
            )
        )
    else:
        # the title as a line of its own: a table's title folds to the table's width
        say(console, f"eval set {eval_set.set_id}: n={config.n}, r={config.r}, reward mean ± se")
        table = Table()
        table.add_column("environment", no_wrap=True)
        for model in config.models:
            table.add_column(model, no_wrap=True)
        for env in config.envs:
            table.add_row(
                env,
                *[
                    _cell_text(eval_set.cell(env, model), summaries.get((env, model)))
                    for model in config.models
                ],
            )
        console.print(table)
        say(console, f"set directory: {eval_set.root}")
    if failed:
        raise CliError(
            f"{len(failed)} of {len(eval_set.cells)} cells failed ("
            + "; ".join(f"{c.env} × {c.model}: {c.error}" for c in failed)
            + f"); the others are saved. Fix the cause, then: prime eval run --resume {eval_set.root}"
        )
