"""An environment's leaderboard: the best finalized run per model, with n and a 95% interval.

`mean_reward` and `stderr` are the wire's names (docs/api.md) for what the run's summary calls
`reward_mean` and `reward_stderr` (`registry_index.summary.Summary`); the hub fills them from
those fields and nothing else, so this model is the one place the other spelling lives.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel


class LeaderboardRow(BaseModel):
    rank: int
    model: str
    served_model: str | None = None  # what the server answered as (its `model` field), if sent
    evaluation_id: str
    mean_reward: float  # Summary.reward_mean of the run
    stderr: float | None  # Summary.reward_stderr of the run
    n: int
    rollouts: int
    errors: int
    env_version: str
    date: datetime
    user: str
    third_party: bool
    ci_low: float  # 95% confidence interval of mean_reward (mean ± 1.96 stderr)
    ci_high: float
    tied: bool  # its interval overlaps another row's of the same rank


class Leaderboard(BaseModel):
    environment: str
    data: list[LeaderboardRow]
