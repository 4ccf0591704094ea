"""Tables of evaluation results.

An `Evaluation` row holds the run's identity (environment version, model, uploader) and the
summary the hub computed at finalize; its samples live in blobs listed by `EvaluationBatch`
rows, one per pushed batch, so a run of 100k rollouts is a handful of rows. `EvaluationSample`
indexes each sample's few scalars for the samples viewer (`evals.sample_index`).
"""

from datetime import datetime
from enum import StrEnum

import sqlalchemy as sa
from sqlmodel import Field, Relationship, SQLModel

from hub_server.accounts.models import User
from hub_server.core.columns import EnumText
from hub_server.core.ids import new_id, utcnow
from hub_server.registry.models import Environment


class EvaluationStatus(StrEnum):
    """A run is open while pushed to, then completed (finalized: it may rank), failed
    (finalized with every rollout an error: nothing to rank, it never does) or abandoned
    (left running past the hub's timeout: it never ranks and is listed only when asked for)."""

    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    ABANDONED = "abandoned"


class VerificationStatus(StrEnum):
    """Where the hub's own re-scoring of a run stands (`evals.verification`): waiting, under
    way, done with every sample matching (`verified`), done with some not matching
    (`disagreed`), impossible (`failed`: not installable, a sandbox or rubric failure), or
    not queued (`skipped`: its account had as many runs waiting as the hub queues per account)."""

    PENDING = "pending"
    RUNNING = "running"
    VERIFIED = "verified"
    DISAGREED = "disagreed"
    FAILED = "failed"
    SKIPPED = "skipped"


class Evaluation(SQLModel, table=True):
    """One evaluation run of one model on one exact environment version."""

    __table_args__ = (sa.UniqueConstraint("user_id", "client_run_id"),)

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    name: str = Field(max_length=256)
    environment_id: str = Field(foreign_key="environment.id", index=True, max_length=32)
    version_id: str = Field(foreign_key="version.id", max_length=32)
    env_version: str = Field(max_length=64)
    user_id: str = Field(foreign_key="user.id", index=True, max_length=32)
    model_name: str = Field(max_length=256, index=True)
    framework: str = Field(default="", max_length=64)
    is_public: bool = False
    status: EvaluationStatus = Field(
        default=EvaluationStatus.RUNNING, sa_type=EnumText(EvaluationStatus, 16)
    )
    # The client's own id for the run (`prime eval push` sends metadata.json's run_id): a
    # retried create with the same id resumes this run instead of making a second one.
    client_run_id: str | None = Field(default=None, max_length=128)
    # Set when the environment's owner hides the run from their leaderboard.
    hidden_at: datetime | None = None
    tags_json: str = "[]"
    metadata_json: str = "{}"
    client_metrics_json: str = "{}"
    summary_json: str | None = None
    sample_count: int = 0
    # `registry_index.summary.Summary`'s names; the columns keep the names the first migration
    # gave them (evals_0001).
    reward_mean: float | None = Field(default=None, sa_column_kwargs={"name": "mean_reward"})
    reward_stderr: float | None = Field(default=None, sa_column_kwargs={"name": "stderr"})
    n_examples: int = 0
    n_rollouts: int = 0
    n_errors: int = 0
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    finalized_at: datetime | None = None
    # The hub's re-scoring (null: not asked for, e.g. verification is off or there is no wheel).
    verification: VerificationStatus | None = Field(
        default=None, sa_type=EnumText(VerificationStatus, 16), index=True
    )
    verification_detail: str | None = Field(default=None, max_length=2000)
    verification_started_at: datetime | None = None
    verification_attempts: int = 0
    verified_at: datetime | None = None

    environment: Environment = Relationship()
    user: User = Relationship()
    batches: list["EvaluationBatch"] = Relationship(
        sa_relationship_kwargs={"order_by": "EvaluationBatch.seq"}
    )


class EvaluationBatch(SQLModel, table=True):
    """One pushed batch of samples: a gzip JSONL blob and the rollout keys it holds."""

    __table_args__ = (sa.UniqueConstraint("evaluation_id", "seq"),)

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    evaluation_id: str = Field(foreign_key="evaluation.id", index=True, max_length=32)
    seq: int
    blob_key: str = Field(max_length=255)
    # sha256 of the batch as received (before rollout numbering): a retried push is a no-op.
    request_sha256: str | None = Field(default=None, max_length=64)
    sample_count: int
    keys_json: str  # [[example_index, rollout_index], …] for duplicate checks without the blob
    # SummaryBuilder.partial() of the batch, so finalize merges sums instead of re-reading blobs
    # (null on batches pushed before migration evals_0002: those are read back from the blob).
    partial_json: str | None = None
    created_at: datetime = Field(default_factory=utcnow)


class EvaluationSample(SQLModel, table=True):
    """One sample of one run: where it is (batch `seq`, `position`) and what filters need."""

    __table_args__ = (
        sa.Index("ix_evaluationsample_reward", "evaluation_id", "reward"),
        sa.Index("ix_evaluationsample_example", "evaluation_id", "example_index"),
    )

    evaluation_id: str = Field(foreign_key="evaluation.id", primary_key=True, max_length=32)
    seq: int = Field(primary_key=True)
    position: int = Field(primary_key=True)
    example_index: int
    rollout_index: int
    reward: float | None = None
    error_type: str | None = Field(default=None, max_length=128)
    stop_reason: str | None = Field(default=None, max_length=64)
