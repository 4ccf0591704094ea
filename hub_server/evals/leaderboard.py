"""Per-environment leaderboard: the best finalized run of each model.

"Best" is the highest hub-computed mean reward (errored rollouts excluded, never counted as
0); ties go to the run with more scored rollouts, then to the newer one. Open runs and runs
with no scored rollout never rank.
"""

from __future__ import annotations

from sqlmodel import Session, col

from hub_server.auth import Principal
from hub_server.evals.models import Evaluation
from hub_server.evals.schemas import LeaderboardRow
from hub_server.evals.service import runs_query
from hub_server.models import Environment, User


def leaderboard(
    session: Session, env: Environment, principal: Principal | None, version: str | None = None
) -> list[LeaderboardRow]:
    query = runs_query(principal).where(
        Evaluation.environment_id == env.id,
        Evaluation.status == "completed",
        col(Evaluation.mean_reward).is_not(None),
    )
    if version:
        query = query.where(Evaluation.env_version == version)
    best: dict[str, Evaluation] = {}
    for evaluation, _env, _owner in session.exec(query):
        current = best.get(evaluation.model_name)
        if current is None or _rank_key(evaluation) > _rank_key(current):
            best[evaluation.model_name] = evaluation
    ordered = sorted(best.values(), key=_rank_key, reverse=True)
    names = _usernames(session, {run.user_id for run in ordered})
    return [
        LeaderboardRow(
            rank=position,
            model=run.model_name,
            evaluation_id=run.id,
            mean_reward=float(run.mean_reward or 0.0),
            stderr=run.stderr,
            n=run.n_examples,
            rollouts=run.n_rollouts,
            errors=run.n_errors,
            env_version=run.env_version,
            date=run.finalized_at or run.created_at,
            user=names.get(run.user_id, "?"),
        )
        for position, run in enumerate(ordered, start=1)
    ]


def _rank_key(run: Evaluation) -> tuple[float, int, str]:
    finished = run.finalized_at or run.created_at
    return (
        run.mean_reward if run.mean_reward is not None else float("-inf"),
        run.n_rollouts,
        finished.isoformat(),
    )


def _usernames(session: Session, user_ids: set[str]) -> dict[str, str]:
    names = {}
    for user_id in user_ids:
        user = session.get(User, user_id)
        if user is not None:
            names[user_id] = user.username
    return names
