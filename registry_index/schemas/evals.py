"""Evaluations (`/api/v1/evaluations/…`): create, push samples, finalize, list, read (the public
Prime hub's field names).

A run is `Envelope[EvaluationInfo]`, a listing `Page[EvaluationInfo]`, a page of samples
`Page[dict[str, Any]]` (rollout records as pushed) and a pushed batch `Envelope[BatchAccepted]`
(`registry_index.schemas.envelope`). Request models ignore unknown fields (`team_id`,
`suite_id`, …) so the stock `prime` client's payloads are accepted as sent; the fields the hub
does not model are kept in `metadata`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from registry_index.schemas.request import RequestBody
from registry_index.summary import Summary


class EnvironmentRef(BaseModel):
    """Which environment was evaluated: `slug` (`owner/name`) or the hub's `id`, and a version."""

    model_config = ConfigDict(extra="ignore")

    slug: str | None = Field(default=None, max_length=200)
    id: str | None = Field(default=None, max_length=64)
    version: str | None = Field(default=None, max_length=64)
    version_id: str | None = Field(default=None, max_length=64)

    @model_validator(mode="after")
    def _one_identity(self) -> EnvironmentRef:
        if not self.slug and not self.id:
            raise ValueError('give the environment as {"slug": "owner/name"} or {"id": ENV_ID}')
        return self


class CreateEvaluation(RequestBody):
    model_config = ConfigDict(extra="ignore")

    name: str = Field(min_length=1, max_length=256)
    environments: list[EnvironmentRef] = Field(default_factory=list, max_length=1)
    environment_ids: list[str] = Field(default_factory=list, max_length=1)
    model_name: str = Field(min_length=1, max_length=256)
    framework: str = Field(default="", max_length=64)
    metadata: dict[str, Any] = Field(default_factory=dict)
    metrics: dict[str, Any] = Field(default_factory=dict)
    tags: list[str] = Field(default_factory=list, max_length=32)
    is_public: bool = False
    # Older prime clients send these top-level; they are kept in metadata.
    dataset: str | None = None
    task_type: str | None = None
    description: str | None = None
    run_id: str | None = None
    # Idempotency: a create repeated with the same id (per user) answers the same run.
    client_run_id: str | None = Field(default=None, min_length=1, max_length=128)

    @model_validator(mode="after")
    def _one_environment(self) -> CreateEvaluation:
        if not self.environments and self.environment_ids:
            self.environments = [EnvironmentRef(id=self.environment_ids[0])]
        if len(self.environments) != 1:
            raise ValueError(
                "environments must name exactly one environment, e.g. "
                '[{"slug": "owner/name", "version": "0.1.0"}]'
            )
        for tag in self.tags:
            if not tag or len(tag) > 64:
                raise ValueError("tags must be non-empty strings of at most 64 characters")
        return self

    def extra_metadata(self) -> dict[str, Any]:
        """`metadata` plus the legacy top-level descriptive fields that were sent."""
        extra = {
            key: value
            for key in ("dataset", "task_type", "description", "run_id")
            if (value := getattr(self, key)) is not None
        }
        return {**extra, **self.metadata}


class FinalizeEvaluation(RequestBody):
    model_config = ConfigDict(extra="ignore")

    metrics: dict[str, Any] | None = None


class EnvironmentLink(BaseModel):
    id: str
    slug: str
    owner: str
    name: str
    version: str
    version_id: str


class EvaluationInfo(BaseModel):
    id: str
    evaluation_id: str
    name: str
    environment: EnvironmentLink
    model_name: str
    framework: str
    status: str
    is_public: bool
    tags: list[str]
    metadata: dict[str, Any]
    metrics: dict[str, Any]
    summary: Summary | None
    """Computed by the hub from the samples at finalize (errors excluded from the means)."""
    sample_count: int
    user: str
    created_at: datetime
    updated_at: datetime
    finalized_at: datetime | None
    third_party: bool = False  # pushed by someone outside the environment's owner
    hidden: bool = False  # hidden from the leaderboard by the environment's owner
    # The hub's own re-scoring: pending, running, verified, disagreed, failed, skipped (not
    # queued) or None (not asked). While pending, the detail says where the run stands and
    # `verification_position` is its place in the queue (1: next; None: its account is past
    # its hourly budget).
    verification: str | None = None
    verification_detail: str | None = None
    verification_position: int | None = None


class EvaluationEnvelope(BaseModel):
    """`evaluation_id` is top-level too: the stock `prime` client reads it there."""

    evaluation_id: str
    data: EvaluationInfo


class BatchAccepted(BaseModel):
    evaluation_id: str
    accepted: int
    batch: int
    sample_count: int
