"""The summary tables `prime eval` prints: one row per model (transposed when too wide), and
what an all-zero run means."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from prime_env.evaluation import EvalRun
from prime_env.summary import Summary


def fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _user_tokens(s: Summary) -> str:
    """A simulated user's tokens beside the policy's (their cost is in the cost cell)."""
    if not (s.user_prompt_tokens or s.user_completion_tokens):
        return ""
    return f" + user {s.user_prompt_tokens:,}/{s.user_completion_tokens:,}"


def summary_row(spec_name: str, summary: Summary, cost: float | None) -> dict[str, Any]:
    return {"model": spec_name, "summary": summary.model_dump(), "cost_usd": cost}


def summary_table(rows: list[tuple[EvalRun, Summary]], width: int) -> Table:
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
        cost = run.cost(s)
        means = {**s.rewards, **s.metrics}
        errors = str(s.errors) + (
            f" ({', '.join(f'{t}: {c}' for t, c in s.error_types.items())})" if s.errors else ""
        )
        cells.append(
            [
                run.spec.name,
                f"{fmt(s.reward_mean)} ± {fmt(s.reward_stderr)}",
                *[fmt(s.pass_at_k.get(k)) for k in ks],
                *[fmt(means.get(m)) for m in metric_names],
                errors,
                f"{s.prompt_tokens:,}/{s.completion_tokens:,}" + _user_tokens(s),
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


def zero_reward_notes(rows: list[tuple[EvalRun, Summary]]) -> list[str]:
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


def fitted_table(
    title: str,
    columns: list[str],
    rows: list[list[str]],
    width: int,
    *,
    whole: tuple[str, ...] = (),
    optional: tuple[str, ...] = (),
) -> Table:
    """A listing that fits `width`: the `optional` columns (least needed first) are left out
    until it does; `whole` columns (ids and paths one copies) never wrap, the rest fold only
    when even the needed columns are wider than the terminal."""
    shown = list(columns)
    for leave_out in (None, *optional):
        if leave_out is not None:
            shown.remove(leave_out)
        table = Table(title=title)
        for name in shown:
            table.add_column(name, no_wrap=name in whole, overflow="fold")
        for row in rows:
            table.add_row(*[row[columns.index(name)] for name in shown])
        if Console(width=10_000).measure(table).maximum <= width:
            break
    return table
