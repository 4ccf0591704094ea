"""One eval run on disk, and the one way its `metadata.json` is written.

An eval run directory is `outputs/evals/<env>--<model>/<run_id>/` (a training run's evals are
`RUN/evals/step_N/`, trainer_bridge.protocol.run_dir beside it) with
- `results.jsonl`: one `prime.rollout/1` record per line, appended and flushed as each rollout
  finishes, so a crash (even SIGKILL) loses at most the line being written;
- `metadata.json` (`EvalMetadata`): the run's configuration (what `--resume` must match), its
  status and, once finished, its summary; beside them the parts other parties add: the
  trainer's `training` block, `prime eval push`'s `pushes`, a replay's `replay_of`, an eval
  set's `eval_set`.

Every writer goes through `EvalRunDir.update_metadata(**fields)`, which merges its fields into
what the file holds and replaces it atomically, so no writer drops another's part; every reader
gets one typed `EvalMetadata` (`metadata()`: a `running` run whose process is gone reads
`interrupted`, prime_env.run_status). Keys the schema does not name (verifiers' `avg_<metric>`,
a newer writer's) are kept as they are.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from registry_index.files import slug, write_json_atomic
from registry_index.summary import Summary

from .errors import EvalError
from .record import RolloutRecord
from .run_status import read_status

RESULTS = "results.jsonl"
METADATA = "metadata.json"
METADATA_SCHEMA = "prime.eval/1"


def config_differences(command: Any, stored: Any, kept_by: str) -> list[str]:
    """Each field of two configs (dataclasses of one kind) that differs, as a resume refusal
    names it: `KEY: run has STORED, command has COMMAND` (`kept_by`: run, set)."""
    mine, theirs = asdict(command), asdict(stored)
    return [
        f"{key}: {kept_by} has {theirs[key]!r}, command has {mine[key]!r}"
        for key in mine
        if mine[key] != theirs[key]
    ]


@dataclass(frozen=True)
class RunConfig:
    """What makes two runs comparable; `--resume` refuses when any of it differs.

    `base_url` is the one the user gave (--base-url), None for named providers.
    """

    env: str
    env_version: str | None
    env_args: dict[str, Any]
    model: str
    base_url: str | None
    n: int
    r: int
    sampling: dict[str, Any]
    api: str | None = None  # the wire format of the server at base_url (--api), None: openai

    @property
    def envs(self) -> list[str]:
        """As an eval set's config names them (`prime eval run --resume` reads either)."""
        return [self.env]

    @property
    def models(self) -> list[str]:
        return [self.model]

    def differences(self, other: RunConfig) -> list[str]:
        return config_differences(self, other, "run")


class TrainingRef(BaseModel):
    """`training`: the `prime train` run an eval of policy N belongs to."""

    run_id: str
    run_dir: str
    step: int
    policy_version: int
    base_model: str
    config_digest: str


class PushRef(BaseModel):
    """One of `pushes`: the hub a run was pushed to and the evaluation it became there."""

    hub: str
    evaluation_id: str


class ReplayOf(BaseModel):
    """`replay_of`: the run whose completions a replay re-scored."""

    run_id: str | None
    directory: str
    env_id: str | None
    served_model: str | None


class EvalSetRef(BaseModel):
    """`eval_set`: the set (every env × every model) a run is a cell of."""

    set_id: str
    directory: str


class RunSummary(Summary):
    """The summary as metadata.json holds it: the run's cost beside it, when the price is known."""

    cost_usd: float | None = None


class EvalMetadata(BaseModel):
    """metadata.json: configuration, model (never a key), times, status, summary (and its
    means again in verifiers' `avg_` names), and the parts other parties add."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    schema_: str = Field(default=METADATA_SCHEMA, alias="schema")
    run_id: str
    status: str | None = None
    owner: dict[str, Any] | None = None
    """The process running it while `running` (prime_env.run_status)."""
    error: str | None = None
    env: str | None = None
    env_id: str | None = None
    env_version: str | None = None
    hub_env: str | None = None
    """`owner/name` when ENV was a hub id: what results are pushed against."""
    env_args: dict[str, Any] = Field(default_factory=dict)
    model: str
    served_model: str | None = None
    provider: str | None = None
    base_url: str | None = None
    model_info: dict[str, Any] = Field(default_factory=dict)
    sampling_args: dict[str, Any] = Field(default_factory=dict)
    num_examples: int | None = None
    rollouts_per_example: int | None = None
    config: RunConfig | None = None
    started_at: str | None = None
    ended_at: str | None = None
    summary: RunSummary | None = None
    avg_reward: float | None = None
    pass_at_k: dict[str, float] | None = None
    replay_of: ReplayOf | None = None
    eval_set: EvalSetRef | None = None
    training: TrainingRef | None = None
    pushes: list[PushRef] = Field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The file's content: the keys it was given, in their JSON form."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)

    def averages(self) -> dict[str, float]:
        """`avg_reward` and the `avg_<metric>` means (what a push sends as its metrics)."""
        return {k: v for k, v in self.to_json().items() if k.startswith("avg_") and v is not None}

    def pushes_to(self, hub: str) -> list[PushRef]:
        return [push for push in self.pushes if push.hub == hub]


def run_name(env_name: str | None, model: str) -> str:
    """`<env>--<model>`, as directory names go: what run directories are grouped under."""
    return f"{slug(env_name or 'env')}--{slug(model)}"


@dataclass(frozen=True)
class EvalRunDir:
    """Paths of one eval run, and the only reader and writer of its metadata.json."""

    root: Path

    @classmethod
    def new(cls, output_root: Path, env_name: str | None, model: str, run_id: str) -> EvalRunDir:
        """A fresh directory `output_root/evals/<env>--<model>/<run_id>` (it must not exist)."""
        root = output_root / "evals" / run_name(env_name, model) / run_id
        root.mkdir(parents=True, exist_ok=False)
        return cls(root)

    @classmethod
    def open(cls, directory: Path) -> EvalRunDir:
        """An existing run directory, or EvalError saying it is not one."""
        found = cls(directory)
        if not found.exists():
            raise EvalError(f"{directory} is not an eval run directory (no {METADATA})")
        return found

    @property
    def results_path(self) -> Path:
        return self.root / RESULTS

    @property
    def metadata_path(self) -> Path:
        return self.root / METADATA

    def exists(self) -> bool:
        return self.metadata_path.is_file()

    def stored(self) -> EvalMetadata | None:
        """metadata.json as written (None before the first write); EvalError if it is not one."""
        if not self.exists():
            return None
        try:
            return EvalMetadata.model_validate(json.loads(self.metadata_path.read_text()))
        except (ValueError, ValidationError) as exc:  # a JSONDecodeError is a ValueError
            raise EvalError(
                f"{self.metadata_path} is not a prime eval metadata file: {exc}"
            ) from None

    def metadata(self) -> EvalMetadata:
        """The metadata as a reader should believe it: a `running` run whose process is gone
        (SIGKILL, a reboot) reads `interrupted`. What every reader uses."""
        meta = self.stored()
        if meta is None:
            raise EvalError(f"{self.root} is not an eval run directory (no {METADATA})")
        status = read_status(meta.to_json())
        return meta if status == meta.status else meta.model_copy(update={"status": status})

    def config(self) -> RunConfig:
        """The configuration the run was made with (what `--resume` fills defaults from)."""
        config = self.metadata().config
        if config is None:
            raise EvalError(f"{self.metadata_path} has no run config: it was not written by a run")
        return config

    def update_metadata(self, **fields: Any) -> EvalMetadata:
        """Merge `fields` (values, or the typed blocks above) into metadata.json and replace
        it atomically; every other key stays as it was. Returns what the file now holds."""
        current = self.stored()
        merged = {"schema": METADATA_SCHEMA, **(current.to_json() if current else {}), **fields}
        meta = EvalMetadata.model_validate(merged)
        write_json_atomic(self.metadata_path, meta.to_json())
        return meta

    def read_results(self, repair: bool = False) -> list[RolloutRecord]:
        return read_results(self.results_path, repair)


def read_results(path: Path, repair: bool = False) -> list[RolloutRecord]:
    """Records of a results file, first occurrence of each key; a torn last line is ignored
    (and cut off the file when `repair`, so appending continues on a clean line)."""
    records: dict[tuple[int, int], RolloutRecord] = {}
    good_end = 0
    if not path.exists():
        return []
    with path.open("rb") as fh:
        data = fh.read()
    offset = 0
    for raw in data.splitlines(keepends=True):
        offset += len(raw)
        if not raw.endswith(b"\n"):
            break  # torn by a crash mid-write
        try:
            record = RolloutRecord.model_validate_json(raw)
        except ValueError:
            if offset == len(data):
                break
            raise EvalError(
                f"{path}: line ending at byte {offset} is not a rollout record"
            ) from None
        records.setdefault(record.key, record)
        good_end = offset
    if repair and good_end != len(data):
        with path.open("r+b") as fh:
            fh.truncate(good_end)
    return sorted(records.values(), key=lambda rec: rec.key)
