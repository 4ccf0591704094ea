"""`prime eval export RUN... --format sft -o FILE`: eval runs become an SFT dataset (JSONL).

A RUN is a local run directory, a run id, or an evaluation on the hub (ids and unique prefixes,
as `prime eval show`), so the runs a hub stores are the dataset store. Records are chosen by
the environment's own rewards (prime_env.sft.select_records: rollouts scored 0 left out unless
`--keep-zero-reward`, `--min-reward`, `--best-of K` per task, de-duplicated) and written one conversation per line (a rollout whose trace graph
branches, an agent program with a subagent, gives one line per branch):
- as chats, `{"messages", "tools", "source"}` (`--tools-as openai|text`, see prime_env.sft);
- with `--tokens`, `{"input_ids", "assistant_masks", "source"}`: the chat rendered by the
  tokenizer of `--tokenizer` as `local/` models render prompts, the loss mask under the name
  TRL's SFTTrainer reads (it folds `assistant_masks` into its labels).
Both load with `datasets.load_dataset("json", data_files=FILE)` and train with TRL's SFTTrainer
unchanged. The file is written next to its destination and renamed into place: a failed export
leaves nothing behind.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import click
from rich.console import Console

from hub_client import settings as cfg
from hub_client.client import HubClient, HubError
from prime_cli.errors import CliError
from prime_cli.eval.runs import find_run, looks_like_path, run_records
from prime_cli.feedback import console_feedback
from prime_cli.messages import say
from prime_cli.options import echo_json, output_option
from prime_env.record import RolloutRecord
from prime_env.sft import (
    TOOLS_AS,
    RenderError,
    ToolsAs,
    chat_samples,
    select_records,
    token_sample,
)
from registry_index.files import write_lines_atomic

err_console = Console(stderr=True)


@click.command("export")
@click.argument("runs", nargs=-1, required=True, metavar="RUN...")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["sft"]),
    default="sft",
    show_default=True,
    help="sft: one chat (or token sequence) per rollout",
)
@click.option(
    "-o",
    "--out",
    "out",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="the JSONL file to write",
)
@click.option("--min-reward", type=float, help="keep rollouts whose reward is at least this")
@click.option(
    "--keep-zero-reward",
    is_flag=True,
    help="keep rollouts scored 0 too (left out by default: rarely an answer to imitate)",
)
@click.option("--best-of", type=click.IntRange(min=1), help="keep the K best rollouts of each task")
@click.option(
    "--dedup/--no-dedup",
    default=True,
    show_default=True,
    help="drop rollouts whose transcript repeats an earlier one",
)
@click.option(
    "--tools-as",
    type=click.Choice(TOOLS_AS),
    default="openai",
    show_default=True,
    help="openai: tool_calls and a tools column, for templates that render tools; text: tools "
    "and calls in the messages' text, as local/ models see them (SmolLM2)",
)
@click.option(
    "--tokens",
    is_flag=True,
    help="write token ids and a loss mask (assistant_masks) instead of chats; needs --tokenizer",
)
@click.option(
    "--tokenizer", help="with --tokens: local/smollm2-135m, or a Hugging Face tokenizer directory"
)
@click.option(
    "--runs-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("outputs"),
    show_default=True,
    help="where run ids are looked up",
)
@output_option
def export_cmd(
    runs: tuple[str, ...],
    fmt: str,
    out: Path,
    min_reward: float | None,
    keep_zero_reward: bool,
    best_of: int | None,
    dedup: bool,
    tools_as: str,
    tokens: bool,
    tokenizer: str | None,
    runs_dir: Path,
    output: str,
) -> None:
    """Write the rollouts of RUN... (directories, run ids, hub evaluation ids) as SFT data."""
    if tokens and not tokenizer:
        raise click.UsageError("--tokens renders the chats with a tokenizer: pass --tokenizer")
    if tokenizer and not tokens:
        raise click.UsageError("--tokenizer is for --tokens; chats are written untokenised")
    records = read_runs(runs, runs_dir)
    selection = select_records(
        records, min_reward=min_reward, best_of=best_of, dedup=dedup, zero_reward=keep_zero_reward
    )
    if not selection.kept:
        raise CliError(
            f"no rollout of {len(records)} passes the filters ({selection.zero_reward} scored 0 "
            f"(--keep-zero-reward keeps them), {selection.errors} errors, "
            f"{selection.below_min_reward} below --min-reward, {selection.duplicates} "
            "duplicates); nothing was written"
        )
    loaded = None
    if tokens:
        from local_model.models import load_tokenizer  # transformers: only when asked for

        try:
            loaded = load_tokenizer(str(tokenizer))
        except (OSError, ValueError) as exc:
            raise CliError(f"cannot load the tokenizer {tokenizer!r}: {exc}") from None
    rows = (
        row
        for record in selection.kept
        for row in (
            _token_rows(loaded, record) if loaded is not None else _chat_rows(record, tools_as)
        )
    )
    written = write_lines_atomic(out, (json.dumps(row, ensure_ascii=False) for row in rows))
    summary = {
        "file": str(out),
        "format": fmt,
        "tokens": tokens,
        "read": selection.read,
        "written": written,
        "rollouts": len(selection.kept),
        "errors": selection.errors,
        "zero_reward": selection.zero_reward,
        "below_min_reward": selection.below_min_reward,
        "duplicates": selection.duplicates,
        "beyond_best_of": selection.beyond_best_of,
    }
    if output == "json":
        echo_json(summary)
        return
    say(
        err_console,
        f"wrote {written} samples of {selection.read} rollouts to {out} (left out: "
        f"{selection.errors} errors, {selection.zero_reward} scored 0 (--keep-zero-reward), "
        f"{selection.below_min_reward} below --min-reward, "
        f"{selection.duplicates} duplicates, {selection.beyond_best_of} beyond --best-of)",
    )


def read_runs(targets: tuple[str, ...], runs_dir: Path) -> list[RolloutRecord]:
    """The records of every RUN, in the order given; the hub is asked only for what is not on
    disk, and only when a RUN needs it."""
    hub: HubClient | None = None
    records: list[RolloutRecord] = []
    try:
        for target in targets:
            try:
                found = find_run(target, None, runs_dir)
            except CliError:
                if looks_like_path(target):
                    raise
                if hub is None:
                    hub = HubClient.from_settings(
                        cfg.load_settings(), feedback=console_feedback(err_console)
                    )
                try:
                    found = find_run(target, hub, runs_dir)
                except HubError as exc:
                    raise CliError(
                        f"no run {target!r} under {runs_dir / 'evals'} (--runs-dir), and the hub "
                        f"could not be asked for one: {exc}"
                    ) from None
            records.extend(run_records(found, hub))
    finally:
        if hub is not None:
            hub.close()
    return records


def _source(record: RolloutRecord) -> dict[str, Any]:
    """Where a sample came from, for filtering and audits (ignored by trainers)."""
    return {
        "run_id": record.run_id,
        "env": record.env,
        "task_id": record.task_id,
        "example_index": record.example_index,
        "rollout_index": record.rollout_index,
        "model": record.model,
        "reward": record.reward,
    }


def _chat_rows(record: RolloutRecord, tools_as: str) -> list[dict[str, Any]]:
    source = _source(record)
    return [
        {**sample, "source": source} for sample in chat_samples(record, cast(ToolsAs, tools_as))
    ]


def _token_rows(tokenizer: Any, record: RolloutRecord) -> list[dict[str, Any]]:
    rows = []
    for chat in chat_samples(record, "openai"):
        try:
            sample = token_sample(tokenizer, chat["messages"], record.tools)
        except RenderError as exc:
            raise CliError(f"{record.run_id} task {record.task_id}: {exc}") from None
        rows.append(
            {
                "input_ids": sample.input_ids,
                "assistant_masks": sample.loss_mask,
                "source": _source(record),
            }
        )
    return rows
