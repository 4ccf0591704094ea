"""The rollout record, schema `prime.rollout/1`: one JSONL line per rollout, and its one validator.

Every producer (eval CLI, trainer) writes a `RolloutRecord`; the hub checks pushed samples with
`ScoredRollout`, the same rules over the fields its summary needs, keeping the rest verbatim (the
stock `prime` client pushes verifiers' flat rows). The rule both share: a rollout with an error is
an infrastructure failure and has no reward, never a 0; a rollout without one must have a reward.
"""

from __future__ import annotations

import math
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

SCHEMA = "prime.rollout/1"

Message = dict[str, Any]


class ErrorInfo(BaseModel):
    """Why a rollout has no reward: an infrastructure or environment failure, never the model's score."""

    model_config = ConfigDict(extra="forbid")

    type: str = Field(min_length=1, max_length=200)
    message: str = Field(default="", max_length=20_000)


class TokenUsage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prompt_tokens: int = Field(default=0, ge=0)
    completion_tokens: int = Field(default=0, ge=0)


class UserUsage(TokenUsage):
    """A simulated user's model (prime_env.harnesses.user_sim): its tokens over the rollout and
    their cost in USD (None when its price is unknown). Never the policy's usage."""

    cost_usd: float | None = Field(default=None, ge=0)


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


class TraceCall(BaseModel):
    """One model call in a rollout's trace graph; indices are into `prompt + completion`."""

    model_config = ConfigDict(extra="forbid")

    request: int | None = Field(default=None, ge=0)
    """The request's last message: the request is the tree path from a root down to it."""
    reply: int = Field(ge=0)
    parent: int | None = Field(default=None, ge=0)
    """The earlier call this one continues (its reply is on this request's path); None: the
    call starts a branch. Training splits a branch where the token ids do not extend."""


class Trace(BaseModel):
    """A rollout's messages as a tree and its calls as nodes (subagents, edited histories).

    `parents[i]` is message i's parent in the tree. `calls[i]` is the model call whose token
    view is `turns[i]`. `simulated` lists the messages a simulated user wrote (never trained).
    """

    model_config = ConfigDict(extra="forbid")

    parents: list[int | None] = Field(default_factory=list)
    calls: list[TraceCall] = Field(default_factory=list)
    simulated: list[int] = Field(default_factory=list)


class SavedState(BaseModel):
    """The environment's own keys of a rollout's state as they were when scoring began (the
    game's `solved`, a tool counter): what a rubric reads beyond the messages, kept so a replay
    restores it. A value that is not plain JSON (a live connection, a tuple) or is too large is
    named in `unsaved` with the reason, so a replay that needs it says so instead of guessing."""

    model_config = ConfigDict(extra="forbid")

    values: dict[str, Any] = Field(default_factory=dict)
    unsaved: dict[str, str] = Field(default_factory=dict)


class ScoredRollout(BaseModel):
    """The fields of a rollout record that scoring and summaries read; other keys are kept."""

    model_config = ConfigDict(extra="allow")

    example_index: int = Field(ge=0)
    rollout_index: int | None = Field(default=None, ge=0)
    reward: float | None = None
    rewards: dict[str, float] = Field(default_factory=dict)
    metrics: dict[str, float] = Field(default_factory=dict)
    error: ErrorInfo | None = None
    stop_reason: str | None = None
    usage: TokenUsage = Field(default_factory=TokenUsage)
    user_usage: UserUsage | None = None
    """A model-played simulated user's tokens and cost (counted in the run's, never trained)."""

    @field_validator("error", mode="before")
    @classmethod
    def _error_from_text(cls, value: Any) -> Any:
        """verifiers records an error as a plain string; keep it, typed as a generic error."""
        if isinstance(value, str):
            return {"type": "Error", "message": value} if value else None
        return value

    @field_validator("usage", mode="before")
    @classmethod
    def _token_counts(cls, value: Any) -> Any:
        """Only the two counts are kept: providers add their own keys (total_tokens, details)."""
        if isinstance(value, TokenUsage):
            return value
        if not isinstance(value, dict):
            return {}
        return {k: value[k] or 0 for k in ("prompt_tokens", "completion_tokens") if k in value}

    @field_validator("rewards", "metrics", mode="before")
    @classmethod
    def _drop_missing(cls, value: Any) -> Any:
        """A metric a rubric could not compute is absent (null in verifiers' rows), not a 0."""
        if isinstance(value, dict):
            return {name: number for name, number in value.items() if number is not None}
        return value

    @field_validator("reward")
    @classmethod
    def _finite_reward(cls, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
            raise ValueError("reward must be a finite number")
        return value

    @field_validator("rewards", "metrics")
    @classmethod
    def _finite_values(cls, value: dict[str, float]) -> dict[str, float]:
        for name, number in value.items():
            if not math.isfinite(number):
                raise ValueError(f"{name} must be a finite number")
        return value

    @model_validator(mode="after")
    def _reward_xor_error(self) -> Self:
        if self.error is not None:
            self.reward = None  # a failure is never averaged in, whatever reward it carries
            self.rewards, self.metrics = {}, {}
        elif self.reward is None:
            raise ValueError(
                "the rollout has neither a reward nor an error; a scored rollout needs "
                "'reward', a failed one needs 'error': {type, message}"
            )
        return self


class RolloutRecord(ScoredRollout):
    """One rollout of one task by one model, exactly as `prime eval run` and `prime train` write it.

    `extra="forbid"`, so every producer writes the same shape and a reader can validate a results
    file line by line instead of guessing which optional keys a given tool emitted.
    """

    model_config = ConfigDict(extra="forbid")

    run_id: str
    env: str
    env_args: dict[str, Any] = Field(default_factory=dict)
    task_id: str
    rollout_index: int = Field(ge=0)
    model: str
    served_model: str | None = None
    """The model that answered, as the server named it (the API's `model` field; the last
    turn's), beside `model`, the name it was asked for."""
    prompt: list[Message]
    completion: list[Message] = Field(default_factory=list)
    answer: Any = None
    info: dict[str, Any] = Field(default_factory=dict)
    timing: Timing = Field(default_factory=Timing)
    policy_version: int | None = None
    turns: list[Turn] | None = None
    trace: Trace | None = None
    """Null for a linear rollout (call i's request is everything before its reply)."""
    tools: list[dict[str, Any]] | None = None
    """The tool schemas offered to the model (OpenAI function specs); None when it had none.
    What an SFT sample of the rollout must show the model again (`prime eval export`)."""
    state: SavedState | None = None
    """The environment's own state keys when scoring began (None: an errored rollout, or a
    record written before they were kept); `prime eval replay` restores them."""

    @property
    def key(self) -> tuple[int, int]:
        """(example_index, rollout_index): the identity `--resume` uses to skip finished rollouts."""
        return (self.example_index, self.rollout_index)

    def to_json(self) -> str:
        """One JSONL line (no trailing newline)."""
        return self.model_dump_json()
