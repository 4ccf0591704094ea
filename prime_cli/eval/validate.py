"""`prime eval validate ENV`: does the environment's reference policy score what it declares?

No model and no key: the reference (prime_env.reference) plays each eval task once through the
environment's own harness, tools and rubric, and every reward is checked against the declared
`min_reward`, the mean against `mean_reward` (prime_env.reference_check). Nothing is written;
`prime eval run ENV -m reference` keeps the traces. Exit 1 when it falls short.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from hub_client.install import ensure_installed
from prime_cli.errors import CliError
from prime_cli.eval.options import EvalOptions, eval_options
from prime_cli.feedback import console_feedback
from prime_cli.messages import say
from prime_cli.options import echo_json, output_option
from prime_env.evaluation import load_env
from prime_env.process import event_loop
from prime_env.reference_check import ReferenceReport, validate_reference

SHOWN_SHORTFALLS = 10
"""Tasks listed by name when the reference falls short (all of them with --output json)."""

console = Console()
err_console = Console(stderr=True)


@click.command("validate")
@click.argument("env_spec", metavar="ENV")
@eval_options(
    "env_args", "n", "concurrency",
    n={"default": -1, "help": "eval tasks to check (-1: all)"},
    concurrency={"default": 8, "help": "rollouts in flight"},
)  # fmt: skip
@output_option
def validate_cmd(env_spec: str, output: str, **flags: Any) -> None:
    """Check, with no model, that ENV's reference policy scores what ENV declares."""
    opts = EvalOptions(**flags)
    env = load_env(
        env_spec,
        opts.env_arguments(),
        install=partial(ensure_installed, feedback=console_feedback(err_console)),
    )
    if env.reference is None:
        raise CliError(
            f"{env.id} ships no reference policy to validate; an environment declares one with "
            "Environment(..., reference=prime_env.Reference(solve, min_reward=...)) (docs/sdk.md)"
        )
    report = event_loop.run(
        validate_reference(env, n=None if opts.n < 0 else opts.n, concurrency=opts.concurrency)
    )
    if output == "json":
        echo_json(_as_json(report))
    else:
        console.print(_table(report))
        for shortfall in report.shortfalls[:SHOWN_SHORTFALLS]:
            where = (
                "all tasks"
                if shortfall.example_index < 0
                else (f"task {shortfall.task_id} (example {shortfall.example_index})")
            )
            say(console, f"[red]short[/]: {where}: {shortfall.why}")
        hidden = len(report.shortfalls) - SHOWN_SHORTFALLS
        if hidden > 0:
            say(console, f"… and {hidden} more (--output json lists them all)")
    if not report.passed:
        raise CliError(
            f"the reference policy of {report.env} falls short on "
            f"{len(report.shortfalls)} check(s) of {len(report.records)} task(s)"
        )
    if output != "json":
        say(console, f"[green]ok[/]: the reference policy of {report.env} scores what it declares")


def _declared(report: ReferenceReport) -> str:
    parts = []
    if report.min_reward is not None:
        parts.append(f"every task ≥ {report.min_reward:g}")
    if report.mean_reward is not None:
        parts.append(f"mean ≥ {report.mean_reward:g}")
    return ", ".join(parts)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _table(report: ReferenceReport) -> Table:
    table = Table(title=f"reference policy of {report.env}")
    for column in ("tasks", "declared", "mean", "lowest", "errors", "short", "result"):
        table.add_column(column)
    table.add_row(
        str(len(report.records)),
        _declared(report),
        _fmt(report.mean),
        _fmt(report.lowest),
        str(report.errors),
        str(len(report.shortfalls)),
        "[green]pass[/]" if report.passed else "[red]FAIL[/]",
    )
    return table


def _as_json(report: ReferenceReport) -> dict[str, object]:
    return {
        "env": report.env,
        "passed": report.passed,
        "tasks": len(report.records),
        "min_reward": report.min_reward,
        "mean_reward": report.mean_reward,
        "mean": report.mean,
        "lowest": report.lowest,
        "errors": report.errors,
        "shortfalls": [
            {
                "task_id": s.task_id,
                "example_index": s.example_index,
                "reward": s.reward,
                "why": s.why,
            }
            for s in report.shortfalls
        ],
    }
