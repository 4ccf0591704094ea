"""Finding and uploading eval runs: local run directories, hub evaluations, short id prefixes.

Local runs live in `outputs/evals/<env>--<model>/<run_id>/` (`metadata.json` + `results.jsonl`,
written by `prime_env.evaluation`). A run is named by its directory, its run id, or any unique
prefix of either kind of id, as with git commits. Pushing follows the stock client's protocol:
create the evaluation, push samples in batches, finalize.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from rich.console import Console

from hub_client import settings as cfg
from hub_client.client import HubClient, NotFound, checked_request
from prime_cli.errors import CliError
from prime_cli.feedback import console_feedback
from prime_env.errors import EvalError
from prime_env.eval_run_dir import METADATA, EvalMetadata, EvalRunDir, PushRef
from prime_env.record import RolloutRecord
from prime_env.run_status import COMPLETED, RUNNING, describe_owner
from registry_index.resolve import parse_env_id
from registry_index.schemas.evals import CreateEvaluation, EnvironmentRef

SAMPLE_BATCH_BYTES = 8 * 1024 * 1024
"""Pushed sample batches stay well under the hub's 32 MiB request limit."""

PREFIX_SCAN_PAGES = 20  # hub evaluations scanned (×100) to expand a short id


def open_hub(err_console: Console) -> HubClient:
    """The hub `prime login` / PRIME_HUB_URL + PRIME_API_KEY name, reporting retries on stderr."""
    return HubClient.from_settings(cfg.load_settings(), feedback=console_feedback(err_console))


@dataclass(frozen=True)
class LocalRun:
    """A run directory under an output dir and its metadata as a reader should believe it."""

    dir: EvalRunDir
    meta: EvalMetadata

    def to_json(self) -> dict[str, Any]:
        return {**self.meta.to_json(), "directory": str(self.dir.root)}


def local_runs(root: Path) -> list[LocalRun]:
    """Every run directory under `root/evals` (a run whose process is gone reads
    `interrupted`, see `EvalRunDir.metadata`); a metadata.json that is not one is passed over."""
    runs = []
    for meta_path in sorted((root / "evals").glob(f"*/*/{METADATA}")):
        run_dir = EvalRunDir(meta_path.parent)
        try:
            runs.append(LocalRun(run_dir, run_dir.metadata()))
        except EvalError:
            continue
    return runs


def looks_like_path(target: str) -> bool:
    return os.sep in target or target.startswith((".", "~")) or Path(target).exists()


@dataclass(frozen=True)
class RunTarget:
    """Where a named run lives: a local directory, or an evaluation id on the hub."""

    directory: Path | None = None
    evaluation_id: str | None = None


def find_run(target: str, hub: HubClient | None, root: Path = Path("outputs")) -> RunTarget:
    """Resolve a run DIRECTORY, run id, evaluation id, or a unique prefix of an id."""
    path = Path(target).expanduser()
    if (path / METADATA).is_file():
        return RunTarget(directory=path)
    if looks_like_path(target):
        raise CliError(
            f"{target} is not an eval run directory (no {METADATA} there); a run directory "
            f"looks like outputs/evals/ENV--MODEL/RUN_ID"
        )
    local = [run.dir.root for run in local_runs(root)]
    matches = [d for d in local if d.name.startswith(target)]
    if len(matches) == 1:
        return RunTarget(directory=matches[0])
    if len(matches) > 1:
        raise CliError(
            f"{target!r} matches {len(matches)} local runs ({', '.join(d.name for d in matches[:5])}); "
            "give more of the id"
        )
    if hub is None:
        raise CliError(f"no run {target!r} under {root / 'evals'}")
    try:
        hub.evaluation(target)
        return RunTarget(evaluation_id=target)
    except NotFound:
        pass
    ids = [eid for eid in _hub_ids(hub) if eid.startswith(target)]
    if len(ids) == 1:
        return RunTarget(evaluation_id=ids[0])
    if len(ids) > 1:
        raise CliError(f"{target!r} matches {len(ids)} evaluations on the hub; give more of the id")
    raise CliError(
        f"no run {target!r}: not a local run under {root / 'evals'} and no evaluation on "
        f"{hub.base_url} with that id or prefix (see `prime eval list`)"
    )


def _hub_ids(hub: HubClient) -> Iterator[str]:
    for page in range(1, PREFIX_SCAN_PAGES + 1):
        listing = hub.list_evaluations(page=page, per_page=100)
        for item in listing.data:
            yield item.id
        if page * 100 >= listing.total_count:
            return


def unpushed_runs(root: Path, hub_url: str) -> list[Path]:
    """Finished local runs not yet pushed to `hub_url` (for `prime eval push` with no DIR);
    runs whose every rollout failed are not among them (`all_failed`)."""
    return [
        run.dir.root
        for run in local_runs(root)
        if run.meta.status == COMPLETED
        and all_failed(run.meta) is None
        and not run.meta.pushes_to(hub_url)
    ]


def all_failed(meta: EvalMetadata) -> str | None:
    """Why a finished run is not pushed when every one of its rollouts failed (nothing was
    scored, so there is nothing to rank: an outage, a bad key or URL), else None."""
    summary = meta.summary
    if summary is None or not summary.rollouts or summary.scored:
        return None
    kinds = ", ".join(f"{kind}: {count}" for kind, count in summary.error_types.items())
    return (
        f"every rollout of this run failed ({kinds or 'errors only'}), so nothing was scored "
        "and there is nothing to rank; it is not pushed. Fix the cause (key, URL, model name) "
        "and start a new run"
    )


def _batches(records: list[RolloutRecord]) -> Iterator[list[dict[str, Any]]]:
    batch: list[dict[str, Any]] = []
    size = 0
    for record in records:
        text = record.to_json()
        if batch and size + len(text) > SAMPLE_BATCH_BYTES:
            yield batch
            batch, size = [], 0
        batch.append(json.loads(text))
        size += len(text)
    if batch:
        yield batch


def _unfinished(directory: Path, meta: EvalMetadata) -> str:
    """Why `directory` cannot be pushed, and what finishes it: only a completed run holds
    every rollout, so a half-finished one is never pushed as if it were complete."""
    status = meta.status
    if status == RUNNING:
        return (
            f"{directory} is still running ({describe_owner(meta.to_json())}); push it once it "
            "has finished"
        )
    from trainer_bridge.protocol.run_dir import train_run_of

    train_run = train_run_of(directory)
    how = (
        f"prime train resume {train_run} (it reruns the evals of the steps it redoes)"
        if train_run is not None
        else f"prime eval run --resume {directory}"
    )
    return (
        f"{directory} is not a complete run (status {status!r}: "
        f"{meta.error or 'it stopped before its last rollout'}); finish it with {how}, "
        "or start a new run"
    )


def _hub_slug(env: str) -> str:
    """`owner/name` of the published environment a run's results belong to (a version after
    `@` is the run's own, from its metadata)."""
    try:
        owner, name, _spec = parse_env_id(env)
    except ValueError:
        owner, name = None, env
    if owner is None:
        raise CliError(
            f"the run's environment {env!r} has no hub owner; pass --env OWNER/NAME naming the "
            "published environment these results belong to"
        )
    return f"{owner}/{name}"


def push_run(
    hub: HubClient,
    directory: Path,
    *,
    env: str | None = None,
    public: bool = False,
    name: str | None = None,
) -> str:
    """Upload one run: create the evaluation, push samples in batches, finalize. Returns its id."""
    run_dir = EvalRunDir(directory)
    if not run_dir.exists():
        raise CliError(f"{directory} is not an eval run directory (no {METADATA})")
    meta = run_dir.metadata()
    if meta.status != COMPLETED:
        raise CliError(_unfinished(directory, meta))
    failed = all_failed(meta)
    if failed is not None:
        raise CliError(f"{directory}: {failed}")
    env_slug = _hub_slug(env or meta.hub_env or meta.env or "")
    records = run_dir.read_results()
    metrics = meta.averages()
    earlier = meta.pushes_to(hub.base_url)
    stored = meta.to_json()
    with checked_request(f"push {directory}"):
        environment = (
            EnvironmentRef(slug=env_slug, version=str(meta.env_version))
            if meta.env_version
            else EnvironmentRef(slug=env_slug)
        )
        body = CreateEvaluation(
            # the same push repeated (a retry after a lost answer) names the same run on the
            # hub; a deliberate second push (--force) is a new run
            client_run_id=f"{meta.run_id or directory.name}-{len(earlier)}",
            name=name or f"{env_slug}--{meta.model}",
            environments=[environment],
            model_name=meta.model,
            framework="prime",
            metadata={
                k: stored.get(k)
                for k in (
                    "run_id",
                    "num_examples",
                    "rollouts_per_example",
                    "sampling_args",
                    "env_args",
                    "model_info",
                    "served_model",  # what the server answered as, beside the alias
                    "replay_of",  # prime eval replay: the run whose completions were re-scored
                    "started_at",
                    "ended_at",
                    "pass_at_k",
                    "training",  # prime train's evals: run, step, policy version
                )
            },
            metrics=metrics,
            tags=[],
            is_public=public,
        )
    evaluation_id = hub.create_evaluation(body).id
    for batch in _batches(records):
        hub.push_samples(evaluation_id, batch)
    hub.finalize_evaluation(evaluation_id, metrics)
    pushed = PushRef(hub=hub.base_url, evaluation_id=evaluation_id)
    run_dir.update_metadata(pushes=[*run_dir.metadata().pushes, pushed])
    return evaluation_id


HUB_SAMPLES_PAGE = 1000
"""Samples read per request when a run is read back from the hub (the API's largest page)."""


def run_records(found: RunTarget, hub: HubClient | None) -> list[RolloutRecord]:
    """The rollout records of a run: its `results.jsonl`, or its samples on the hub (the runs a
    hub stores are the datasets it serves: there is no second store)."""
    if found.directory is not None:
        return EvalRunDir(found.directory).read_results()
    if hub is None or found.evaluation_id is None:
        raise CliError("a hub evaluation needs a hub to read it from (prime login)")
    evaluation_id = found.evaluation_id
    records: list[RolloutRecord] = []
    page = 1
    while True:
        chunk = hub.evaluation_samples(evaluation_id, page, HUB_SAMPLES_PAGE)
        for position, row in enumerate(chunk.data):
            try:
                records.append(RolloutRecord.model_validate(row))
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(part) for part in first["loc"])
                raise CliError(
                    f"sample {(page - 1) * HUB_SAMPLES_PAGE + position} of evaluation "
                    f"{evaluation_id} is not a prime.rollout/1 record ({where}: {first['msg']}); "
                    "only runs pushed by `prime eval run --push` / `prime eval push` carry "
                    "whole transcripts"
                ) from None
        if not chunk.data or page * HUB_SAMPLES_PAGE >= chunk.total_count:
            return records
        page += 1
