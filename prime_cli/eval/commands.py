"""`prime eval …`: run an environment against one or more models, resume, push, read back.

The command is a shell: model strings are resolved by `prime_env.clients.model_specs`, runs are
created, resumed and summarised by `prime_env.evaluation`, rollouts are run by the SDK's
runner. What lives here is argument handling, the live display, tables, and the hub upload
(`eval.runs` over `hub_client`; prime_env never talks to the hub).
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

from hub_client import settings as cfg
from hub_client.client import HubClient, HubError
from hub_client.install import InstallError, ensure_installed
from prime_cli.errors import CliError, expected
from prime_cli.eval.export import export_cmd
from prime_cli.eval.runs import find_run, local_runs, push_run, unpushed_runs
from prime_cli.eval.validate import validate_cmd
from prime_cli.feedback import console_feedback
from prime_cli.messages import say
from prime_cli.options import echo_json, output_option, page_of, paging_options
from prime_cli.options import json_object as _json_option
from prime_cli.program_host import program_on_host_option
from prime_env.clients.base import ModelClient
from prime_env.clients.model_specs import ModelConfigError, default_model, resolve_model
from prime_env.clients.retry import RetryPolicy
from prime_env.errors import EnvironmentNotFound
from prime_env.evaluation import (
    METADATA,
    RESULTS,
    EvalError,
    EvalRun,
    RunConfig,
    execute,
    load_env,
    normalize_sampling,
    read_results,
    read_run_metadata,
    resume_run,
    start_run,
    stored_config,
)
from prime_env.process import event_loop
from prime_env.process.parallel import ClientFactory
from prime_env.record import RolloutRecord
from prime_env.summary import Summary
from registry_index.schemas.evals import EvaluationInfo

console = Console()
err_console = Console(stderr=True)

expected(EvalError, ModelConfigError, EnvironmentNotFound, HubError, InstallError)
expected(cfg.ConfigError)

LIVE_RATE_WINDOW_S = 5.0
"""A local model's tokens/s on the live display is measured over this many recent seconds."""

LOCAL_MAX_TOKENS = 256
"""Per-turn token cap for the built-in CPU model when none is given: SmolLM2-135M rarely needs
more for these tasks, and uncapped it can ramble for minutes per rollout."""


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


def _explicit(ctx: click.Context, name: str) -> bool:
    return ctx.get_parameter_source(name) in (
        ParameterSource.COMMANDLINE,
        ParameterSource.ENVIRONMENT,
    )


@dataclass
class _Tracker:
    """Running numbers for one model's live display line."""

    total: int
    done: int = 0
    reward_sum: float = 0.0
    scored: int = 0
    errors: int = 0
    tokens: int = 0
    resumed: int = 0  # rollouts already done when this invocation started
    started: float = field(default_factory=time.perf_counter)
    live: Callable[[], int] | None = None  # tokens sampled so far (a local model in-process)
    live_base: int = 0
    window: deque[tuple[float, int]] = field(default_factory=deque)

    def tokens_per_s(self) -> float:
        """Completion tokens per second. For a local model, counted as it samples and over the
        last few seconds (its current speed, not diluted by the model's loading time)."""
        now = time.perf_counter()
        if self.live is None:
            return self.tokens / max(now - self.started, 1e-6)
        made = self.live() - self.live_base
        self.window.append((now, made))
        while len(self.window) > 2 and now - self.window[1][0] >= LIVE_RATE_WINDOW_S:
            self.window.popleft()
        then, before = self.window[0]
        return (made - before) / (now - then) if now - then > 0.2 else 0.0

    def add(self, record: RolloutRecord) -> None:
        self.done += 1
        self.tokens += record.usage.completion_tokens
        if record.error is not None:
            self.errors += 1
        elif record.reward is not None:
            self.scored += 1
            self.reward_sum += record.reward

    def fields(self) -> dict[str, Any]:
        mean = f"{self.reward_sum / self.scored:.3f}" if self.scored else "-"
        elapsed = max(time.perf_counter() - self.started, 1e-6)
        return {
            "reward": mean,
            "errors": str(self.errors),
            "rate": f"{(self.done - self.resumed) / elapsed:.2f}",
        }


class _TokensPerSecond(ProgressColumn):
    """Rendered on every refresh (rich's own thread), so it moves between finished rollouts."""

    def render(self, task: Task) -> Text:
        tracker = task.fields.get("tracker")
        rate = tracker.tokens_per_s() if isinstance(tracker, _Tracker) else 0.0
        return Text(f"{rate:,.0f} tok/s")


@dataclass(frozen=True)
class _Outcome:
    summary: Summary
    new_rollouts: int
    elapsed_s: float  # wall time of this invocation's rollouts (start-up excluded)


async def _run_all(
    runs: list[tuple[EvalRun, ModelClient, ClientFactory]],
    concurrency: int,
    workers: int,
    progress: Progress,
) -> list[_Outcome]:
    async def one(run: EvalRun, client: ModelClient, factory: ClientFactory) -> _Outcome:
        tracker = _Tracker(total=run.total)
        for rec in run.done:
            tracker.add(rec)
        tracker.resumed, tracker.tokens = tracker.done, 0
        if run.spec.client == "local" and workers == 1:
            from local_model.decode import sampled_tokens

            tracker.live, tracker.live_base = sampled_tokens, sampled_tokens()
        task = progress.add_task(
            run.spec.name,
            total=run.total,
            completed=tracker.done,
            tracker=tracker,
            **tracker.fields(),
        )

        def on_record(record: RolloutRecord) -> None:
            tracker.add(record)
            progress.update(task, advance=1, **tracker.fields())

        before, start = tracker.done, time.perf_counter()
        try:
            summary = await execute(
                run,
                client,
                concurrency=concurrency,
                on_record=on_record,
                workers=workers,
                client_factory=factory,
            )
        finally:
            await client.aclose()
        return _Outcome(summary, tracker.done - before, time.perf_counter() - start)

    # SIGTERM (a scheduler, `kill`) stops the runs as Ctrl-C does: cancelled, each writes
    # `interrupted` to its metadata.json and stays resumable (the default action writes nothing).
    loop, main = asyncio.get_running_loop(), asyncio.current_task()
    assert main is not None
    loop.add_signal_handler(signal.SIGTERM, main.cancel)
    try:
        return list(await asyncio.gather(*(one(*run) for run in runs)))
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


def _progress(disable: bool) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("reward {task.fields[reward]}"),
        TextColumn("errors {task.fields[errors]}"),
        TextColumn("{task.fields[rate]} rollouts/s"),
        _TokensPerSecond(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        console=err_console,
        disable=disable,
        refresh_per_second=4,
    )


def _fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _summary_row(spec_name: str, summary: Summary, cost: float | None) -> dict[str, Any]:
    return {"model": spec_name, "summary": summary.model_dump(), "cost_usd": cost}


def _table(rows: list[tuple[EvalRun, Summary]], width: int) -> Table:
    """One row per model; transposed (one row per figure, a column per model) when that is
    too wide for the terminal, so an 80-column window stays readable."""
    metric_names = sorted({name for _, s in rows for name in [*s.rewards, *s.metrics]})
    ks = sorted({k for _, s in rows for k in s.pass_at_k}, key=int)
    title = f"{rows[0][0].env.id}: n={rows[0][0].config.n}, r={rows[0][0].config.r}"
    headers = [
        "model",
        "reward (mean ± se)",
        *[f"pass@{k}" for k in ks],
        *metric_names,
        "errors",
        "tokens in/out",
        "cost",
    ]
    cells: list[list[str]] = []
    for run, s in rows:
        cost = run.spec.cost(s.prompt_tokens, s.completion_tokens)
        means = {**s.rewards, **s.metrics}
        errors = str(s.errors) + (
            f" ({', '.join(f'{t}: {c}' for t, c in s.error_types.items())})" if s.errors else ""
        )
        cells.append(
            [
                run.spec.name,
                f"{_fmt(s.reward_mean)} ± {_fmt(s.reward_stderr)}",
                *[_fmt(s.pass_at_k.get(k)) for k in ks],
                *[_fmt(means.get(m)) for m in metric_names],
                errors,
                f"{s.prompt_tokens:,}/{s.completion_tokens:,}",
                "-" if cost is None else f"${cost:.4f}",
            ]
        )
    wide = Table(title=title)
    for header in headers:
        wide.add_column(header, no_wrap=True)
    for row in cells:
        wide.add_row(*row)
    if Console(width=10_000).measure(wide).maximum <= width:
        return wide
    narrow = Table(title=title)
    narrow.add_column("", style="bold", no_wrap=True)
    for row in cells:
        narrow.add_column(row[0], overflow="fold")
    for index, header in enumerate(headers[1:], start=1):
        narrow.add_row(header, *[row[index] for row in cells])
    return narrow


def _zero_reward_notes(rows: list[tuple[EvalRun, Summary]]) -> list[str]:
    """When every scored rollout got 0, say whether that is the model or infrastructure."""
    notes = []
    for run, s in rows:
        if not s.scored or s.reward_mean != 0:
            continue
        errored = f"; {s.errors} more errored and are not counted" if s.errors else ""
        notes.append(
            f"{run.spec.name}: all {s.scored} scored rollouts got reward 0 — the model's answers "
            f"were graded wrong, not errors{errored}. Read a few with "
            f"`prime eval show {run.directory} --samples 3`"
        )
    return notes


@eval_group.command("run")
@click.argument("env_spec", metavar="ENV", required=False)
@click.option(
    "-m",
    "--model",
    "models",
    multiple=True,
    help="provider/model, an endpoints.toml alias, or any name with --base-url "
    "(repeat to compare models). Default: openai/gpt-4.1-mini when OPENAI_API_KEY "
    "is set, else local/smollm2-135m.",
)
@click.option(
    "-n",
    "--num-examples",
    "n",
    type=int,
    default=5,
    show_default=True,
    help="tasks to evaluate (-1: all)",
)
@click.option("-r", "--rollouts-per-example", "r", type=int, default=3, show_default=True)
@click.option(
    "-c",
    "--max-concurrent",
    "concurrency",
    type=click.IntRange(min=1),
    default=32,
    show_default=True,
    help="rollouts in flight per model",
)
@click.option(
    "-w",
    "--workers",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="processes per model sharing -c (more than one when one event loop is the limit)",
)
@click.option("-a", "--env-args", help="JSON object passed to load_environment")
@click.option(
    "-S", "--sampling-args", help="JSON object of sampling settings (provider extras pass through)"
)
@click.option("-t", "--max-tokens", type=click.IntRange(min=1))
@click.option("-T", "--temperature", type=click.FloatRange(min=0))
@click.option("-b", "--base-url", help="an OpenAI-compatible server to send -m NAME to")
@click.option("-k", "--api-key-var", help="environment variable holding the API key")
@click.option(
    "--endpoints",
    type=click.Path(dir_okay=False, path_type=Path),
    help="endpoints.toml (default: ./endpoints.toml, ~/.config/prime/endpoints.toml)",
)
@click.option(
    "-o",
    "--output-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("outputs"),
    show_default=True,
)
@click.option(
    "--resume",
    "resume_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="finish an interrupted run directory (same settings required)",
)
@click.option("--stream/--no-stream", default=False, help="stream responses (SSE)")
@click.option(
    "--max-retries",
    type=click.IntRange(min=0),
    default=5,
    show_default=True,
    help="retries per model call for transport errors, timeouts, 429 and 5xx",
)
@click.option(
    "--timeout",
    "timeout_s",
    type=click.FloatRange(min=0.1),
    default=120.0,
    show_default=True,
    help="seconds per model call",
)
@click.option("--push", is_flag=True, help="upload the results to the hub when done")
@click.option("--public", is_flag=True, help="with --push: make the run public (leaderboard)")
@click.option("--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
@program_on_host_option
@click.pass_context
def run(
    ctx: click.Context,
    env_spec: str | None,
    models: tuple[str, ...],
    n: int,
    r: int,
    concurrency: int,
    workers: int,
    env_args: str | None,
    sampling_args: str | None,
    max_tokens: int | None,
    temperature: float | None,
    base_url: str | None,
    api_key_var: str | None,
    endpoints: Path | None,
    output_dir: Path,
    resume_dir: Path | None,
    stream: bool,
    max_retries: int,
    timeout_s: float,
    push: bool,
    public: bool,
    output: str,
) -> None:
    """Evaluate ENV (a path, an installed name, or OWNER/NAME[@VERSION] from the hub)."""
    if r < 1:
        raise click.BadParameter("must be at least 1", param_hint="-r")
    if workers > concurrency:
        raise click.BadParameter(
            f"-c {concurrency} cannot be shared by {workers} worker processes; "
            "give at most -c worker processes",
            param_hint="-w",
        )
    args = _json_option(env_args, "--env-args")
    sampling = _json_option(sampling_args, "--sampling-args")
    if max_tokens is not None:
        sampling["max_tokens"] = max_tokens
    if temperature is not None:
        sampling["temperature"] = temperature
    if resume_dir is not None:
        if len(models) > 1:
            raise click.UsageError("--resume continues one run; give at most one -m")
        stored = stored_config(resume_dir)
        env_spec = env_spec or stored.env
        models = models or (stored.model,)
        n = n if _explicit(ctx, "n") else stored.n
        r = r if _explicit(ctx, "r") else stored.r
        args = args if env_args is not None else stored.env_args
        sampling = (
            sampling
            if (sampling_args or max_tokens is not None or temperature is not None)
            else stored.sampling
        )
        base_url = base_url if base_url is not None else stored.base_url
    if env_spec is None:
        raise click.UsageError("missing ENV: a path, an installed environment or OWNER/NAME")
    specs = [
        resolve_model(m, base_url=base_url, api_key_var=api_key_var, endpoints=endpoints)
        for m in (models or (default_model(),))
    ]
    if len({s.name for s in specs}) != len(specs):
        raise click.UsageError("the same -m is given twice")
    for spec in specs:
        spec.api_key()  # a missing key fails here, before anything is installed or written
    if (
        resume_dir is None
        and "max_tokens" not in sampling
        and all(spec.client == "local" for spec in specs)
    ):
        sampling["max_tokens"] = LOCAL_MAX_TOKENS
        err_console.print(
            f"{', '.join(spec.name for spec in specs)} runs on this CPU: each turn is capped at "
            f"{LOCAL_MAX_TOKENS} tokens (pass -t N to change)"
        )
    env = load_env(
        env_spec, args, install=partial(ensure_installed, feedback=console_feedback(err_console))
    )
    configs = [
        RunConfig(
            env=env_spec,
            env_version=env.version,
            env_args=args,
            model=spec.name,
            base_url=base_url,
            n=n,
            r=r,
            sampling=normalize_sampling(sampling),
        )
        for spec in specs
    ]
    # made before any run directory is: a client that cannot be made (-m reference of an
    # environment without one) leaves nothing on disk
    policy = RetryPolicy(max_attempts=max_retries + 1, timeout_s=timeout_s)
    clients = [spec.create_client(stream=stream, policy=policy, env=env) for spec in specs]
    factories = [
        partial(spec.create_client, stream=stream, policy=policy, env=env) for spec in specs
    ]
    runs = [
        resume_run(resume_dir, env, spec, config)
        if resume_dir is not None
        else start_run(env, spec, config, output_dir)
        for spec, config in zip(specs, configs)
    ]
    for run_ in runs:
        verb = "resuming" if resume_dir else "writing"
        say(err_console, f"{verb} {run_.directory} ({len(run_.done)}/{run_.total} done)")
    progress = _progress(disable=output == "json")
    try:
        with progress:
            outcomes = event_loop.run(
                _run_all(list(zip(runs, clients, factories)), concurrency, workers, progress)
            )
    except (KeyboardInterrupt, asyncio.CancelledError) as exc:  # Ctrl-C, SIGTERM
        dirs = " ".join(str(run_.directory) for run_ in runs)
        raise CliError(
            f"interrupted; finished rollouts are saved. Continue with: prime eval run --resume {dirs}",
            status=1 if isinstance(exc, KeyboardInterrupt) else 128 + signal.SIGTERM,
        ) from None
    rows = [(run_, outcome.summary) for run_, outcome in zip(runs, outcomes)]
    pushed: dict[Path, str] = {}
    if push:
        with _hub() as hub:
            for run_, _ in rows:
                pushed[run_.directory] = push_run(hub, run_.directory, public=public)
    if output == "json":
        click.echo(
            json.dumps(
                {
                    "runs": [
                        {
                            **_summary_row(
                                run_.spec.name,
                                s,
                                run_.spec.cost(s.prompt_tokens, s.completion_tokens),
                            ),
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
                },
                indent=2,
            )
        )
    else:
        console.print(_table(rows, console.width))
        for note in _zero_reward_notes(rows):
            console.print(note)
        for run_, _ in rows:
            say(console, f"{run_.spec.name}: {run_.directory}")
        for directory, evaluation_id in pushed.items():
            say(console, f"pushed {directory} as evaluation {evaluation_id}")
    failed = [run_.spec.name for run_, s in rows if s.rollouts and s.scored == 0]
    if failed:
        raise CliError(
            f"every rollout of {', '.join(failed)} failed (see the errors column), so nothing "
            "was scored; fix the cause (key, URL, model name) and start a new run"
        )


# ------------------------------------------------------------------ hub


def _hub() -> HubClient:
    return HubClient.from_settings(cfg.load_settings(), feedback=console_feedback(err_console))


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
            meta_path = directory / METADATA
            previous = (
                json.loads(meta_path.read_text()).get("pushes", []) if meta_path.is_file() else []
            )
            done = [p for p in previous if p.get("hub") == hub.base_url]
            if done and not force:
                raise CliError(
                    f"{directory} was already pushed to {hub.base_url} as evaluation "
                    f"{done[-1]['evaluation_id']}; use --force to push it again"
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
        return ["-", "-", "-", "-"]
    return [
        _fmt(summary.reward_mean),
        _fmt(summary.reward_stderr),
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
            m
            for m in local_runs(local_root)
            if (env is None or m.get("env") == env) and (model is None or m.get("model") == model)
        ]
        if output == "json":
            echo_json({"runs": runs})
            return
        table = Table(title=f"runs under {local_root}")
        for column in ("directory", "env", "model", "n×r", "reward", "errors", "status"):
            table.add_column(column, overflow="fold")
        for m in runs:
            s = m.get("summary") or {}
            table.add_row(
                m["directory"],
                str(m.get("env_id")),
                str(m.get("model")),
                f"{m.get('num_examples')}×{m.get('rollouts_per_example')}",
                f"{_fmt(s.get('reward_mean'))} ± {_fmt(s.get('reward_stderr'))}",
                str(s.get("errors", "-")),
                str(m.get("status")),
            )
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
    table = Table(title=f"evaluations ({listing.total_count} total, page {page})")
    for column in (
        "id",
        "environment",
        "model",
        "reward",
        "stderr",
        "rollouts",
        "errors",
        "status",
        "verified",
        "created",
    ):
        table.add_column(column, overflow="fold")
    for item in listing.data:
        table.add_row(
            item.id,
            f"{item.environment.slug}@{item.environment.version}",
            item.model_name,
            *_hub_summary_cells(item),
            item.status,
            item.verification or "-",  # the hub's own re-scoring (docs/eval.md)
            item.created_at.isoformat()[:19],
        )
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
            meta = read_run_metadata(found.directory)
            records = read_results(found.directory / RESULTS)[:samples] if samples else []
            payload: dict[str, Any] = {
                "data": meta,
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
        console.print_json(json.dumps(sample))


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
            records = read_results(found.directory / RESULTS)
            total = len(records)
            rows = [json.loads(r.to_json()) for r in records[(page - 1) * num : page * num]]
        else:
            sample_page = hub.evaluation_samples(str(found.evaluation_id), page, num)
            rows, total = sample_page.data, sample_page.total_count
    if output == "json":
        echo_json({"samples": rows, "total": total, "page": page, "per_page": num})
        return
    for sample in rows:
        console.print_json(json.dumps(sample))
    console.print(
        f"[dim]samples {(page - 1) * num + 1}-{(page - 1) * num + len(rows)} of {total}[/]"
    )


eval_group.add_command(validate_cmd)
eval_group.add_command(export_cmd)
