"""The layout of one training run on disk.

`outputs/train/<env>--<model>/<run_id>/` holds
- `run.json`: status, config digest, pushes (replaced atomically, never half-written); while
  `running`, the owner process (pid, start time, host), so `status()` can tell a run that was
  SIGKILLed (it reads `interrupted`) from one still running;
- `config/resolved.toml`: the full configuration the run was started with (what the trainer
  child reads and what `prime train resume` compares against);
- `metrics.jsonl`: one line per trained step; `trainer_metrics.jsonl`: the trainer's half of it;
- `rollouts/step_N.jsonl`: every rollout record that step saw (errors and drops included);
  `rollouts/unbatched.jsonl`: a stopped run's finished groups that no trained batch holds, which
  its resume uses; `progress.json`: the step being sampled, live;
- `batches/step_N/`, `broadcasts/step_N/`, `checkpoints/step_N/`: handed between processes,
  each directory complete only once its `STABLE` marker exists (written last);
- `evals/step_N/`: standard eval runs (`prime eval push` reads them);
- `logs/`: one log per child process; `plots/train.png`.

Every process of the run (orchestrator, trainer) derives paths from this one class, so the
layout has a single home.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prime_env.run_status import read_status, status_fields
from registry_index.files import check_run_name, slug, utc_now, write_json_atomic
from trainer_bridge.protocol.stable import step_dir

RUN_JSON = "run.json"
RESOLVED = "config/resolved.toml"
TRAINER_METRICS = "trainer_metrics.jsonl"


def train_run_of(eval_dir: Path) -> Path | None:
    """The `prime train` run an eval run directory belongs to (`RUN/evals/step_N`), or None:
    such an eval is finished by resuming the train run, not by `prime eval run --resume`."""
    root = eval_dir.resolve().parent.parent
    if eval_dir.resolve().parent.name == "evals" and (root / RUN_JSON).is_file():
        return root
    return None


@dataclass(frozen=True)
class RunDir:
    """Paths of one training run."""

    root: Path

    @classmethod
    def new(cls, output_dir: Path, env_id: str, model: str, run_id: str | None = None) -> RunDir:
        run_id = check_run_name(
            run_id or dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
        )
        root = output_dir / "train" / f"{slug(env_id)}--{slug(model)}" / run_id
        root.mkdir(parents=True, exist_ok=False)
        run = cls(root)
        for sub in ("config", "rollouts", "evals", "broadcasts", "batches", "checkpoints"):
            (root / sub).mkdir(exist_ok=True)
        run.logs.mkdir(exist_ok=True)
        run.plots.mkdir(exist_ok=True)
        return run

    @property
    def run_id(self) -> str:
        return self.root.name

    @property
    def run_json(self) -> Path:
        return self.root / RUN_JSON

    @property
    def resolved_config(self) -> Path:
        return self.root / RESOLVED

    @property
    def metrics(self) -> Path:
        return self.root / "metrics.jsonl"

    @property
    def trainer_metrics(self) -> Path:
        return self.root / TRAINER_METRICS

    def trim_trainer_metrics(self, start: int) -> None:
        """On resume, forget the trainer's metrics of the steps from `start` on: they are
        trained again."""
        path = self.trainer_metrics
        if not path.is_file():
            return
        kept = [line for line in path.read_text().splitlines() if json.loads(line)["step"] < start]
        path.write_text("".join(line + "\n" for line in kept))

    @property
    def progress(self) -> Path:
        """The step being sampled, live (orchestrator/progress.py)."""
        return self.root / "progress.json"

    @property
    def unbatched(self) -> Path:
        """Finished groups no trained batch holds yet, kept by a stopped run for its resume."""
        return self.root / "rollouts" / "unbatched.jsonl"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def plots(self) -> Path:
        return self.root / "plots"

    def rollouts(self, step: int) -> Path:
        return self.root / "rollouts" / f"step_{step}.jsonl"

    def batch(self, step: int) -> Path:
        return step_dir(self.root / "batches", step)

    def broadcast(self, step: int) -> Path:
        return step_dir(self.root / "broadcasts", step)

    def checkpoint(self, step: int) -> Path:
        return step_dir(self.root / "checkpoints", step)

    def eval_dir(self, step: int) -> Path:
        return step_dir(self.root / "evals", step)

    def read_run_json(self) -> dict[str, Any]:
        if not self.run_json.is_file():
            return {}
        return dict(json.loads(self.run_json.read_text()))

    def update_run_json(self, **fields: Any) -> dict[str, Any]:
        """Merge `fields` into run.json (atomically) and return the new content."""
        data = self.read_run_json() | fields
        data["updated_at"] = utc_now()
        write_json_atomic(self.run_json, data)
        return data

    def set_status(self, status: str, **fields: Any) -> dict[str, Any]:
        """Record `status` (with `fields`): `running` names this process as the run's owner,
        any other status clears it."""
        return self.update_run_json(**status_fields(status), **fields)

    def status(self) -> str | None:
        """The run's status as it stands now: `running` whose process is gone (SIGKILL, a
        reboot) reads `interrupted` (prime_env.run_status, the rule eval runs share)."""
        return read_status(self.read_run_json())
