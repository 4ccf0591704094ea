"""`prime eval …`: run an environment against one or more models, resume, push, read back.

The command is a shell: model strings are resolved by `prime_env.clients.model_specs`, runs are
created, resumed and summarised by `prime_env.evaluation`, rollouts are run by the SDK's
runner. What lives here is argument handling, the live display, tables, and the hub upload
(`eval.runs` over `hub_client`; prime_env never talks to the hub).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import signal
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource
from rich.table import Table

from engines.choice import choose, runs_in_process, with_engine
from engines.install import EngineError
from engines.vllm_server import ServerError
from hub_client import settings as cfg
from hub_client.client import HubClient, HubError
from hub_client.install import InstallError, ensure_installed
from prime_cli.adapter import adapter_directory
from prime_cli.errors import CliError, expected
from prime_cli.eval.export import export_cmd
from prime_cli.eval.live import Outcome, progress_display, run_all
from prime_cli.eval.local_cap import cap_local_tokens
from prime_cli.eval.optimize import optimize_cmd
from prime_cli.eval.options import CALLS, MODEL, SAMPLING, EvalOptions, eval_options
from prime_cli.eval.replay import replay_cmd
from prime_cli.eval.runs import find_run, local_runs, open_hub, push_run, unpushed_runs
from prime_cli.eval.sets import SetRequest, run_set
from prime_cli.eval.tables import (
    fitted_table,
    fmt,
    summary_row,
    summary_table,
    zero_reward_notes,
)
from prime_cli.eval.transcript import print_conversation
from prime_cli.eval.validate import validate_cmd
from prime_cli.eval.view import view_cmd
from prime_cli.feedback import console_feedback
from prime_cli.messages import output_console, say
from prime_cli.options import echo_json, output_option, page_of, paging_options
from prime_cli.program_host import program_on_host_option
from prime_env.clients.model_specs import ModelConfigError, ModelSpec, default_model, resolve_model
from prime_env.errors import DatasetError, EnvironmentNotFound
from prime_env.eval_run_dir import EvalRunDir, RunConfig
from prime_env.eval_sets import SetConfig, is_set_dir, read_set
from prime_env.evaluation import (
    EvalError,
    EvalRun,
    load_env,
    normalize_sampling,
    resume_run,
    start_run,
)
from prime_env.process import event_loop
from prime_env.summary import Summary
from registry_index.schemas.evals import EvaluationInfo

console = output_console()
err_console = output_console(stderr=True)

expected(EvalError, ModelConfigError, EnvironmentNotFound, HubError, InstallError, DatasetError)
expected(cfg.ConfigError, EngineError, ServerError)


class _EvalGroup(click.Group):
    """`prime eval ENV …` is `prime eval run ENV …`, as with the stock client."""

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            run_cmd = self.commands["run"]
            return "run", run_cmd, args
        return super().resolve_command(ctx, args)


@click.group("eval", cls=_EvalGroup)
def eval_group() -> None:
    """Evaluate models on environments, resume runs, push results to the hub.

    `prime eval ENV [OPTIONS]` is short for `prime eval run ENV [OPTIONS]`.
    """


# ------------------------------------------------------------------ run


@eval_group.command("run")
@click.argument("env_specs", metavar="ENV...", nargs=-1)
@eval_options(
    *MODEL, "backend", "env_args", "n", "r", *SAMPLING, "concurrency", "workers", "stream", *CALLS,
    "output_dir", "resume_dir", "retry_errors", "max_error_share", "retries", "push", "public",
    push={"help": "upload the results to the hub when done"},
)  # fmt: skip
@output_option
@program_on_host_option
@click.pass_context
def run(ctx: click.Context, env_specs: tuple[str, ...], output: str, **flags: Any) -> None:
    """Evaluate ENV (a path, an installed name, or OWNER/NAME[@VERSION] from the hub).

    Several ENVs make an eval set: every ENV × every -m, in one resumable set directory, with
    per-cell retries and one summary table."""
    opts = EvalOptions(**flags)
    if opts.workers > opts.concurrency:
        raise click.BadParameter(
            f"-c {opts.concurrency} cannot be shared by {opts.workers} worker processes; "
            "give at most -c worker processes",
            param_hint="-w",
        )
    in_set = len(env_specs) > 1 or (opts.resume_dir is not None and is_set_dir(opts.resume_dir))
    plan = _plan(ctx, opts, env_specs, in_set)
    if in_set:
        request = plan.set_request(output)
        _start_servers(plan.specs)
        return run_set(request)
    rows, outcomes = _run_one_env(plan, output)
    failed = [
        (run_, s) for run_, s in rows if s.rollouts and s.errors > opts.max_error_share * s.rollouts
    ]
    pushed = _push_ranked(rows, failed, opts) if opts.push else {}
    _report(rows, outcomes, pushed, output)
    if failed:
        raise CliError(_too_many_errors(failed, opts.max_error_share, opts.push))


@dataclass(frozen=True)
class _Plan:
    """What `prime eval run` will do: its options (a resume's stored settings filled in), the
    environments, and the models resolved (their keys checked)."""

    opts: EvalOptions
    env_specs: tuple[str, ...]
    env_args: dict[str, Any]
    sampling: dict[str, Any]
    specs: list[ModelSpec]

    def set_request(self, output: str) -> SetRequest:
        opts = self.opts
        if len(set(self.env_specs)) != len(self.env_specs):
            raise click.UsageError("the same ENV is given twice")
        config = SetConfig(
            list(self.env_specs), [s.name for s in self.specs], self.env_args, opts.n, opts.r,
            normalize_sampling(self.sampling), opts.base_url, opts.api,
        )  # fmt: skip
        return SetRequest(
            config, self.specs, opts.output_dir, opts.resume_dir, opts.concurrency, opts.workers,
            opts.stream, opts.retry_policy(), opts.retries, opts.push, opts.public, output,
        )  # fmt: skip


def _explicit(ctx: click.Context, name: str) -> bool:
    return ctx.get_parameter_source(name) in (
        ParameterSource.COMMANDLINE,
        ParameterSource.ENVIRONMENT,
    )


def _plan(ctx: click.Context, opts: EvalOptions, env_specs: tuple[str, ...], in_set: bool) -> _Plan:
    """The options with a resumed run's (or set's) settings where none were given, and the
    models resolved; a usage error before anything is installed or written."""
    env_args, sampling = opts.env_arguments(), opts.sampling()
    if opts.resume_dir is not None:
        if len(opts.models) > 1 and not in_set:
            raise click.UsageError("--resume continues one run; give at most one -m")
        stored = (
            read_set(opts.resume_dir).config
            if in_set
            else EvalRunDir.open(opts.resume_dir).config()
        )
        env_specs = env_specs or tuple(stored.envs)
        env_args = env_args if opts.env_args is not None else stored.env_args
        sampling = sampling if opts.sampling_given() else stored.sampling
        opts = dataclasses.replace(
            opts,
            models=opts.models or tuple(stored.models),
            n=opts.n if _explicit(ctx, "n") else stored.n,
            r=opts.r if _explicit(ctx, "r") else stored.r,
            base_url=opts.base_url if opts.base_url is not None else stored.base_url,
            api=opts.api if opts.api is not None else stored.api,
        )
    if not env_specs:
        raise click.UsageError("missing ENV: a path, an installed environment or OWNER/NAME")
    models = opts.models or (default_model(),)
    if opts.adapter is not None:  # `-m BASE --adapter DIR` is the model `BASE+DIR`
        adapter = adapter_directory(opts.adapter, models)
        models = tuple(f"{m}+{adapter}" for m in models)
    specs = [
        resolve_model(
            m, base_url=opts.base_url, api_key_var=opts.api_key_var, endpoints=opts.endpoints,
            api=opts.api,
        )
        for m in models
    ]  # fmt: skip
    if len({s.name for s in specs}) != len(specs):
        raise click.UsageError("the same -m is given twice")
    specs = _with_engine(specs, opts.backend, opts.workers)
    for spec in specs:
        spec.api_key()  # a missing key fails here, before anything is installed or written
    if opts.resume_dir is None:
        cap_local_tokens(specs, sampling, err_console)
    return _Plan(opts, env_specs, env_args, sampling, specs)


def _with_engine(specs: list[ModelSpec], backend: str, workers: int) -> list[ModelSpec]:
    """The specs with their in-process models on the engine `--backend` picks (said when
    `auto` picked it)."""
    if not any(runs_in_process(spec) for spec in specs):
        return specs
    choice = choose(backend)
    if backend == "auto":
        say(err_console, choice.describe())
    if choice.kind == "vllm" and workers > 1:
        raise click.BadParameter(
            "one vLLM server batches every request: give -w 1 with --backend vllm",
            param_hint="-w",
        )
    return with_engine(specs, choice.kind)


def _start_servers(specs: list[ModelSpec]) -> None:
    """Start the vLLM servers of `--backend vllm` models before the eval's clock starts (they
    stop when this process exits)."""
    if any(spec.client == "vllm" for spec in specs):
        from engines.provider import start_servers

        event_loop.run(start_servers(specs, lambda line: say(err_console, line)))


def _run_one_env(plan: _Plan, output: str) -> tuple[list[tuple[EvalRun, Summary]], list[Outcome]]:
    """One ENV with every model side by side: the runs started (or resumed), run to their end."""
    opts, policy = plan.opts, plan.opts.retry_policy()
    [env_spec] = plan.env_specs
    env = load_env(
        env_spec,
        plan.env_args,
        install=partial(ensure_installed, feedback=console_feedback(err_console)),
    )
    # made before any run directory is: a client that cannot be made (-m reference of an
    # environment without one) leaves nothing on disk
    factories = [
        partial(spec.create_client, stream=opts.stream, policy=policy, env=env)
        for spec in plan.specs
    ]
    clients = [factory() for factory in factories]
    _start_servers(plan.specs)
    runs = []
    for spec in plan.specs:
        config = RunConfig(
            env=env_spec, env_version=env.version, env_args=plan.env_args, model=spec.name,
            base_url=opts.base_url, n=opts.n, r=opts.r,
            sampling=normalize_sampling(plan.sampling), api=opts.api,
        )  # fmt: skip
        run_ = (
            resume_run(opts.resume_dir, env, spec, config, retry_errors=opts.retry_errors)
            if opts.resume_dir is not None
            else start_run(env, spec, config, opts.output_dir)
        )
        verb = "resuming" if opts.resume_dir else "writing"
        again = f"; {run_.retried} errored rollouts to run again" if run_.retried else ""
        say(err_console, f"{verb} {run_.directory} ({len(run_.done)}/{run_.total} done{again})")
        runs.append(run_)
    progress = progress_display(err_console, disable=output == "json")
    try:
        with progress:
            outcomes = event_loop.run(
                run_all(list(zip(runs, clients, factories)), opts.concurrency, opts.workers,
                        progress)
            )  # fmt: skip
    except (KeyboardInterrupt, asyncio.CancelledError) as exc:  # Ctrl-C, SIGTERM
        dirs = " ".join(str(run_.directory) for run_ in runs)
        raise CliError(
            f"interrupted; finished rollouts are saved. Continue with: prime eval run --resume {dirs}",
            status=1 if isinstance(exc, KeyboardInterrupt) else 128 + signal.SIGTERM,
        ) from None
    return [(run_, outcome.summary) for run_, outcome in zip(runs, outcomes)], outcomes


def _push_ranked(
    rows: list[tuple[EvalRun, Summary]],
    failed: list[tuple[EvalRun, Summary]],
    opts: EvalOptions,
) -> dict[Path, str]:
    """Push every run but those with too many errors (they are not ranked)."""
    ranked = [run_ for run_, _ in rows if all(run_ is not bad for bad, _ in failed)]
    if not ranked:
        return {}
    with _hub() as hub:
        return {
            run_.directory: push_run(hub, run_.directory, public=opts.public) for run_ in ranked
        }


def _too_many_errors(failed: list[tuple[EvalRun, Summary]], share: float, pushed: bool) -> str:
    """Why the command exits 1: each run whose errored share is over `share`, and the fix."""
    parts = []
    for run_, s in failed:
        if s.scored == 0:
            parts.append(
                f"every rollout of {run_.spec.name} failed (see the errors column), so nothing "
                f"was scored{' and nothing of it was pushed' if pushed else ''}; fix the cause "
                "(key, URL, model name) and start a new run"
            )
            continue
        parts.append(
            f"{s.errors} of {s.rollouts} rollouts of {run_.spec.name} errored "
            f"({s.errors / s.rollouts:.0%}, over --max-error-share {share:g})"
            f"{', so it was not pushed' if pushed else ''}; fix "
            f"the cause, then run them again: prime eval run --resume {run_.directory}"
        )
    return "\n".join(parts)


def _report(
    rows: list[tuple[EvalRun, Summary]],
    outcomes: list[Outcome],
    pushed: dict[Path, str],
    output: str,
) -> None:
    """The summary table and where each run is (stdout), or the same as JSON for scripts."""
    if output == "json":
        runs = [
            {
                **summary_row(run_.spec.name, s, run_.cost(s)),
                "env": run_.env.id,
                "run_id": run_.run_id,
                "directory": str(run_.directory),
                "evaluation_id": pushed.get(run_.directory),
                "new_rollouts": o.new_rollouts,
                "elapsed_s": round(o.elapsed_s, 3),
                "rollouts_per_s": round(o.new_rollouts / max(o.elapsed_s, 1e-9), 1),
            }
            for (run_, s), o in zip(rows, outcomes)
        ]
        click.echo(json.dumps({"runs": runs}, indent=2))
        return
    console.print(summary_table(rows, console.width))
    for note in zero_reward_notes(rows):
        console.print(note)
    for run_, _ in rows:
        say(console, f"{run_.spec.name}: {run_.directory}")
    for directory, evaluation_id in pushed.items():
        say(console, f"pushed {directory} as evaluation {evaluation_id}")


# ------------------------------------------------------------------ hub


def _hub() -> HubClient:
    return open_hub(err_console)


@eval_group.command("push")
@click.argument(
    "directories",
    nargs=-1,
    type=click.Path(file_okay=False, exists=True, path_type=Path),
)
@click.option("-e", "--env", help="OWNER/NAME the results belong to (default: from metadata.json)")
@click.option("--name", help="a display name for the evaluation")
@click.option("--public", is_flag=True, help="make the run public (appears on the leaderboard)")
@click.option("--force", is_flag=True, help="push again even if already pushed to this hub")
@click.option(
    "-o",
    "--output-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("outputs"),
    show_default=True,
    help="where to look for runs when no DIRECTORY is given",
)
@output_option
def push(
    directories: tuple[Path, ...],
    env: str | None,
    name: str | None,
    public: bool,
    force: bool,
    output_dir: Path,
    output: str,
) -> None:
    """Upload finished run DIRECTORIES (outputs/evals/<env>--<model>/<run_id>) to the hub.

    With no DIRECTORY, every finished run under outputs/evals not yet pushed to this hub.
    """
    results = []
    with _hub() as hub:
        chosen = list(directories) or unpushed_runs(output_dir, hub.base_url)
        if not chosen:
            raise CliError(
                f"no finished, unpushed runs under {output_dir / 'evals'}; run `prime eval run` "
                "first or pass a run DIRECTORY"
            )
        for directory in chosen:
            stored = EvalRunDir(directory).stored()
            done = stored.pushes_to(hub.base_url) if stored is not None else []
            if done and not force:
                raise CliError(
                    f"{directory} was already pushed to {hub.base_url} as evaluation "
                    f"{done[-1].evaluation_id}; use --force to push it again"
                )
            evaluation_id = push_run(hub, directory, env=env, public=public, name=name)
            results.append({"directory": str(directory), "evaluation_id": evaluation_id})
    if output == "json":
        echo_json({"pushed": results})
    else:
        for item in results:
            say(console, f"pushed {item['directory']} as evaluation {item['evaluation_id']}")


# ------------------------------------------------------------------ read back


def _hub_summary_cells(item: EvaluationInfo) -> list[str]:
    summary = item.summary
    if summary is None:  # not finalized yet: the hub computes it at finalize
        return ["- ± -", "-", "-"]
    return [
        f"{fmt(summary.reward_mean)} ± {fmt(summary.reward_stderr)}",
        str(summary.rollouts),
        str(summary.errors),
    ]


@eval_group.command("list")
@click.option(
    "--local",
    "local_root",
    type=click.Path(file_okay=False, path_type=Path),
    is_flag=False,
    flag_value=Path("outputs"),
    default=None,
    help="list run directories under this output dir (default outputs) instead of the hub",
)
@click.option("-e", "--env", help="only this environment (OWNER/NAME)")
@click.option("-m", "--model", help="only this model")
@paging_options()
@output_option
def list_cmd(
    local_root: Path | None,
    env: str | None,
    model: str | None,
    num: int,
    page: int,
    offset: int | None,
    output: str,
) -> None:
    """List evaluations on the hub (or local run directories with --local)."""
    if local_root is not None:
        runs = [
            run
            for run in local_runs(local_root)
            if (env is None or run.meta.env == env) and (model is None or run.meta.model == model)
        ]
        if output == "json":
            echo_json({"runs": [run.to_json() for run in runs]})
            return
        rows = [
            [
                str(run.dir.root),
                str(run.meta.env_id),
                str(run.meta.model),
                f"{run.meta.num_examples}×{run.meta.rollouts_per_example}",
                f"{fmt(s.reward_mean)} ± {fmt(s.reward_stderr)}" if s else "- ± -",
                str(s.errors) if s else "-",
                str(run.meta.status),
            ]
            for run in runs
            for s in [run.meta.summary]
        ]
        columns = ["directory", "env", "model", "n×r", "reward", "errors", "status"]
        table = fitted_table(
            f"runs under {local_root}", columns, rows, console.width,
            whole=("directory", "reward"), optional=("n×r", "status", "errors", "model", "env"),
        )  # fmt: skip
        console.print(table)
        return
    page = page_of(page, num, offset)
    with _hub() as hub:
        listing = hub.list_evaluations(env=env, model=model, page=page, per_page=num)
    if output == "json":
        echo_json(
            {
                **listing.model_dump(mode="json"),
                "total": listing.total_count,
                "offset": (page - 1) * num,
            }
        )
        return
    columns = ["id", "environment", "model", "reward", "rollouts", "errors", "status",
               "verified", "created"]  # fmt: skip
    rows = [
        [
            item.id,
            f"{item.environment.slug}@{item.environment.version}",
            item.model_name,
            *_hub_summary_cells(item),
            item.status,
            item.verification or "-",  # the hub's own re-scoring (docs/eval.md)
            item.created_at.isoformat()[:16].replace("T", " "),
        ]
        for item in listing.data
    ]
    table = fitted_table(
        f"evaluations ({listing.total_count} total, page {page})", columns, rows, console.width,
        whole=("id", "reward"), optional=("created", "rollouts", "verified", "status", "errors"),
    )  # fmt: skip
    console.print(table)


@eval_group.command("show")
@click.argument("target")
@click.option(
    "--samples", type=click.IntRange(min=0), default=0, help="also print this many samples"
)
@output_option
def show(target: str, samples: int, output: str) -> None:
    """Show a run: a local run DIRECTORY, a run id, or an evaluation ID on the hub.

    Any unique prefix of a run id or evaluation id will do.
    """
    with _hub() as hub:
        found = find_run(target, hub)
        if found.directory is not None:
            run_dir = EvalRunDir(found.directory)
            records = run_dir.read_results()[:samples] if samples else []
            payload: dict[str, Any] = {
                "data": run_dir.metadata().to_json(),
                "samples": [json.loads(rec.to_json()) for rec in records],
            }
        else:
            evaluation_id = str(found.evaluation_id)
            payload = {"data": hub.evaluation(evaluation_id).model_dump(mode="json")}
            if samples:
                payload["samples"] = hub.evaluation_samples(evaluation_id, 1, samples).data
    if output == "json":
        echo_json(payload)
        return
    table = Table(show_header=False, title=str(found.directory or found.evaluation_id))
    for key, value in payload["data"].items():
        if key in ("config", "model_info"):
            continue
        table.add_row(key, value if isinstance(value, str) else json.dumps(value))
    console.print(table)
    for sample in payload.get("samples", []):
        print_conversation(console, sample)


eval_group.add_command(show, "get")  # the stock client's name


@eval_group.command("samples")
@click.argument("target")
@paging_options(default_size=10)
@output_option
def samples_cmd(target: str, num: int, page: int, offset: int | None, output: str) -> None:
    """Print the samples of a run (local DIRECTORY, run id, evaluation id, or a prefix)."""
    page = page_of(page, num, offset)
    with _hub() as hub:
        found = find_run(target, hub)
        if found.directory is not None:
            records = EvalRunDir(found.directory).read_results()
            total = len(records)
            rows = [json.loads(r.to_json()) for r in records[(page - 1) * num : page * num]]
        else:
            sample_page = hub.evaluation_samples(str(found.evaluation_id), page, num)
            rows, total = sample_page.data, sample_page.total_count
    if output == "json":
        echo_json({"samples": rows, "total": total, "page": page, "per_page": num})
        return
    for sample in rows:
        print_conversation(console, sample)
    console.print(
        f"[dim]samples {(page - 1) * num + 1}-{(page - 1) * num + len(rows)} of {total}[/]"
    )


eval_group.add_command(replay_cmd)
eval_group.add_command(optimize_cmd)
eval_group.add_command(validate_cmd)
eval_group.add_command(export_cmd)
eval_group.add_command(view_cmd)
