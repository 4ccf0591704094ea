"""Eval sets: every environment × every model, as one resumable directory.

`<output>/sets/<set_id>/set.json` holds the set's configuration (what a resume must match) and
one entry per cell (environment, model): its run directory (a standard eval run under the set
directory, `evals/<env>--<model>/<run_id>/`), status, attempts and the hub evaluation it was
pushed as. It is replaced atomically after every change, so a set stopped anywhere (Ctrl-C,
`kill -9`, a crash) resumes from what it says. The running of cells, retries and display
are the CLI's (prime_cli/eval/sets.py); this is the layout, shared with notebooks and scripts.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from registry_index.files import utc_now, write_json_atomic, write_lines_atomic

from .errors import EvalError
from .eval_run_dir import RESULTS, config_differences, read_results

SET_FILE = "set.json"
SET_SCHEMA = "prime.eval_set/1"

PENDING = "pending"  # not started, or stopped before its run finished: resumed next time
COMPLETED = "completed"  # its run finished (it may hold errored rollouts, kept after retries)
FAILED = "failed"  # every attempt crashed, or every rollout errored: nothing to rank


@dataclass(frozen=True)
class SetConfig:
    """What makes a set the same set; a resume that differs in any of it is refused."""

    envs: list[str]
    models: list[str]
    env_args: dict[str, Any]
    n: int
    r: int
    sampling: dict[str, Any]
    base_url: str | None = None
    api: str | None = None

    def differences(self, other: SetConfig) -> list[str]:
        return config_differences(self, other, "set")


@dataclass
class Cell:
    env: str
    model: str
    directory: str | None = None  # relative to the set directory
    status: str = PENDING
    attempts: int = 0
    error: str | None = None
    evaluation_id: str | None = None


@dataclass
class EvalSet:
    root: Path
    set_id: str
    config: SetConfig
    created_at: str
    cells: list[Cell] = field(default_factory=list)

    @property
    def path(self) -> Path:
        return self.root / SET_FILE

    def cell(self, env: str, model: str) -> Cell:
        return next(c for c in self.cells if c.env == env and c.model == model)

    def run_dir(self, cell: Cell) -> Path | None:
        return None if cell.directory is None else self.root / cell.directory

    def save(self) -> None:
        payload = {
            "schema": SET_SCHEMA,
            "set_id": self.set_id,
            "created_at": self.created_at,
            "config": asdict(self.config),
            "cells": [asdict(c) for c in self.cells],
        }
        write_json_atomic(self.path, payload)


def is_set_dir(directory: Path) -> bool:
    return (directory / SET_FILE).is_file()


def new_set(output_root: Path, config: SetConfig) -> EvalSet:
    set_id = uuid.uuid4().hex[:8]
    root = output_root / "sets" / set_id
    root.mkdir(parents=True)
    created = utc_now()
    cells = [Cell(env, model) for env in config.envs for model in config.models]
    eval_set = EvalSet(root, set_id, config, created, cells)
    eval_set.save()
    return eval_set


def read_set(root: Path) -> EvalSet:
    """The set at `root`, or EvalError saying why it is not one."""
    if not (root / SET_FILE).is_file():
        raise EvalError(
            f"{root} is not an eval set directory (no {SET_FILE} there); --resume takes the "
            "set directory a matrix run printed, e.g. outputs/sets/SET_ID"
        )
    try:
        data = json.loads((root / SET_FILE).read_text())
        return EvalSet(
            root,
            str(data["set_id"]),
            SetConfig(**data["config"]),
            str(data["created_at"]),
            [Cell(**cell) for cell in data["cells"]],
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise EvalError(f"{root} is not an eval set directory ({SET_FILE}: {exc})") from None


def drop_errored(run_dir: Path) -> int:
    """Remove a cell run's errored records so a resume runs those rollouts again (a retry);
    returns how many were dropped. The file is replaced atomically."""
    records = read_results(run_dir / RESULTS, repair=True)
    kept = [rec for rec in records if rec.error is None]
    if len(kept) == len(records):
        return 0
    write_lines_atomic(run_dir / RESULTS, (rec.to_json() for rec in kept))
    return len(records) - len(kept)
