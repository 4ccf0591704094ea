"""Per-environment leaderboard: the best finalized run of each model.

"Best" is the highest hub-computed mean reward (errored rollouts excluded, never counted as
0); ties go to the run with more scored rollouts, then to the newer one. Open runs and runs
with no scored rollout never rank.
"""

from __future__ import annotations

from typing import Any

from sqlmodel import Session, col

from hub_server.accounts.auth import Principal
from hub_server.accounts.models import User
from hub_server.evals.models import Evaluation
from hub_server.evals.schemas import LeaderboardRow
from hub_server.evals.service import runs_query
from hub_server.registry.models import Environment

_COLUMNS = (
    Evaluation.id,
    Evaluation.model_name,
    Evaluation.mean_reward,
    Evaluation.stderr,
    Evaluation.n_examples,
    Evaluation.n_rollouts,
    Evaluation.n_errors,
    Evaluation.env_version,
    Evaluation.finalized_at,
    User.username,
)


def leaderboard(
    session: Session, env: Environment, principal: Principal | None, version: str | None = None
) -> list[LeaderboardRow]:
    query = (
        runs_query(principal, *_COLUMNS)
        .join(User, col(User.id) == col(Evaluation.user_id))
        .where(
            Evaluation.environment_id == env.id,
            Evaluation.status == "completed",
            col(Evaluation.mean_reward).is_not(None),
        )
    )
    if version:
        query = query.where(Evaluation.env_version == version)
    best: dict[str, Any] = {}
    for run in session.exec(query):
        current = best.get(run.model_name)
        if current is None or _rank_key(run) > _rank_key(current):
            best[run.model_name] = run
    ordered = sorted(best.values(), key=_rank_key, reverse=True)
    return [
        LeaderboardRow(
            rank=position,
            model=run.model_name,
            evaluation_id=run.id,
            mean_reward=float(run.mean_reward),
            stderr=run.stderr,
            n=run.n_examples,
            rollouts=run.n_rollouts,
            errors=run.n_errors,
            env_version=run.env_version,
            date=run.finalized_at,
            user=run.username,
        )
        for position, run in enumerate(ordered, start=1)
    ]


def _rank_key(run: Any) -> tuple[float, int, str]:
    """Higher mean first, then more scored rollouts, then the newer run."""
    return (float(run.mean_reward), int(run.n_rollouts), run.finalized_at.isoformat())
