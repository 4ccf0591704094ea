"""The rollout record, schema `prime.rollout/1`: one JSONL line per rollout.

It is a pydantic model with `extra="forbid"` so that every producer (eval CLI, trainer,
hub upload) writes exactly the same shape, and a reader can validate a results file line
by line instead of guessing which optional keys a given tool emitted.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

SCHEMA = "prime.rollout/1"

Message = dict[str, Any]


class ErrorInfo(BaseModel):
    """Why a rollout has no reward: an infrastructure or environment failure, never the model's score."""

    model_config = ConfigDict(extra="forbid")

    type: str
    message: str


class TokenUsage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prompt_tokens: int = 0
    completion_tokens: int = 0


class Timing(BaseModel):
    model_config = ConfigDict(extra="forbid")

    generation_ms: float = 0.0
    scoring_ms: float = 0.0
    total_ms: float = 0.0


class Turn(BaseModel):
    """Token-level view of one model call, for training without re-tokenising the transcript."""

    model_config = ConfigDict(extra="forbid")

    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    completion_logprobs: list[float] | None = None
    policy_version: int | None = None
    """The policy that sampled this turn (training); a record's version is its oldest turn's."""


class RolloutRecord(BaseModel):
    """One rollout of one task by one model. `reward` is None exactly when `error` is set."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    env: str
    env_args: dict[str, Any] = Field(default_factory=dict)
    task_id: str
    example_index: int
    rollout_index: int
    model: str
    prompt: list[Message]
    completion: list[Message] = Field(default_factory=list)
    answer: Any = None
    info: dict[str, Any] = Field(default_factory=dict)
    reward: float | None = None
    rewards: dict[str, float] = Field(default_factory=dict)
    metrics: dict[str, float] = Field(default_factory=dict)
    error: ErrorInfo | None = None
    stop_reason: str | None = None
    usage: TokenUsage = Field(default_factory=TokenUsage)
    timing: Timing = Field(default_factory=Timing)
    policy_version: int | None = None
    turns: list[Turn] | None = None

    @property
    def key(self) -> tuple[int, int]:
        """(example_index, rollout_index): the identity `--resume` uses to skip finished rollouts."""
        return (self.example_index, self.rollout_index)

    def to_json(self) -> str:
        """One JSONL line (no trailing newline)."""
        return self.model_dump_json()
