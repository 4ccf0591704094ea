"""`prime eval replay RUN [--env ENV@VERSION]`: re-score a finished run's saved completions with
another rubric version, no model calls, into a new run linked to the first
(`prime_env.replay` does the work; this is the shell)."""

from __future__ import annotations

import json
from functools import partial
from typing import Any

import click
from rich.markup import escape

from hub_client.install import ensure_installed
from prime_cli.eval.options import EvalOptions, eval_options
from prime_cli.eval.runs import find_run, open_hub, push_run
from prime_cli.eval.tables import fmt, summary_table
from prime_cli.feedback import console_feedback
from prime_cli.messages import output_console, say
from prime_cli.options import output_option
from prime_env.eval_run_dir import EvalRunDir
from prime_env.evaluation import load_env
from prime_env.process import event_loop
from prime_env.record import RolloutRecord
from prime_env.replay import replay_run

console = output_console()
err_console = output_console(stderr=True)


@click.command("replay")
@click.argument("target", metavar="RUN")
@click.option(
    "--env",
    "env_spec",
    help="the environment to score with, e.g. OWNER/NAME@VERSION (default: the run's own)",
)
@eval_options(
    "env_args", "output_dir", "push", "public",
    env_args={"help": "JSON object for load_environment (default: the run's)"},
    push={"help": "upload the new run to the hub"},
)  # fmt: skip
@output_option
def replay_cmd(target: str, env_spec: str | None, output: str, **flags: Any) -> None:
    """Re-score RUN (a run directory, run id or prefix) with ENV's rubric, without calling the
    model: a new run under OUTPUT_DIR whose metadata.json names RUN (`replay_of`)."""
    opts = EvalOptions(**flags)
    source = find_run(target, None, opts.output_dir).directory
    assert source is not None  # find_run without a hub finds local runs only
    source_dir = EvalRunDir.open(source)
    stored = source_dir.config()
    args = stored.env_args if opts.env_args is None else opts.env_arguments()
    spec = env_spec or stored.env
    env = load_env(
        spec, args, install=partial(ensure_installed, feedback=console_feedback(err_console))
    )
    before = source_dir.metadata()
    unscored: list[RolloutRecord] = []

    def note(record: RolloutRecord) -> None:
        if record.error is not None and record.error.type == "scoring_error":
            unscored.append(record)

    run, summary = event_loop.run(replay_run(source, env, spec, opts.output_dir, on_record=note))
    evaluation_id = None
    if opts.push:
        with open_hub(err_console) as hub:
            evaluation_id = push_run(hub, run.directory, public=opts.public)
    old = before.summary
    if output == "json":
        click.echo(
            json.dumps(
                {
                    "source": str(source),
                    "directory": str(run.directory),
                    "run_id": run.run_id,
                    "env": env.id,
                    "source_env": before.env_id,
                    "summary": summary.model_dump(),
                    "source_summary": old.model_dump() if old else {},
                    "evaluation_id": evaluation_id,
                },
                indent=2,
            )
        )
        return
    console.print(summary_table([(run, summary)], console.width))
    say(
        console,
        f"replayed {summary.rollouts} rollouts of {source} ({before.env_id}) with "
        f"{env.id}, no model calls: reward {fmt(old.reward_mean if old else None)} -> "
        f"{fmt(summary.reward_mean)}",
    )
    say(console, f"{run.spec.name}: {run.directory}")
    if unscored:
        first = unscored[0]
        say(
            err_console,
            f"[yellow]{len(unscored)} rollout(s) could not be re-scored[/yellow] (scoring_error, "
            f"not averaged in); the first, {escape(first.task_id)}: "
            + escape(first.error.message if first.error else ""),
        )
    if evaluation_id is not None:
        say(console, f"pushed {run.directory} as evaluation {evaluation_id}")
