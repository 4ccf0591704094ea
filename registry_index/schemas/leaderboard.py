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
    # 95% interval of mean_reward, as the board ranks it: mean ± 1.96·max(stderr, σ/√n), σ the
    # board's pooled per-example spread (docs/eval.md, "Reading a leaderboard"); ranked by
    # ci_low.
    ci_low: float
    ci_high: float
    tied: bool  # its interval reaches its rank's first row's ci_low: not told apart
    verified: bool = False  # the hub re-scored the run itself and every score matched


class Leaderboard(BaseModel):
    environment: str
    data: list[LeaderboardRow]
