"""An environment's leaderboard: the best finalized run per model, with n and a 95% interval."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel


class LeaderboardRow(BaseModel):
    rank: int
    model: str
    evaluation_id: str
    mean_reward: float
    stderr: float | None
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
