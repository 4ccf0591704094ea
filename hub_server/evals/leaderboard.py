"""Per-environment leaderboard: the best finalized run of each model.

"Best" is the highest hub-computed mean reward (errored rollouts excluded, never counted as
0); ties go to the run with more scored rollouts, then to the newer one. Open, abandoned and
owner-hidden runs never rank. Each row states n and a 95% confidence interval; rows whose
intervals overlap the interval of their group's first row share its rank and are `tied`,
so a difference the samples cannot support is not shown as a ranking. Runs pushed by people
outside the environment's owner are marked `third_party` and can be left out.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlmodel import Session, col

from hub_server.accounts.auth import Principal
from hub_server.accounts.models import User
from hub_server.evals.integrity import MAX_ABS_SCORE, finite_score
from hub_server.evals.models import Evaluation, EvaluationStatus
from hub_server.evals.service import runs_query, third_party_clause
from hub_server.registry.models import Environment
from registry_index.schemas.leaderboard import LeaderboardRow

# Two-sided 95% normal quantile.
_Z95 = 1.96


# The ranking rule, as columns compared in descending order: higher mean first, then more
# scored rollouts, then the newer run (the id only makes exact ties deterministic). It picks
# each model's best run and orders the board.
_RANKING = ("reward_mean", "n_rollouts", "finalized_at", "id")


def leaderboard(
    session: Session,
    env: Environment,
    principal: Principal | None,
    version: str | None = None,
    *,
    include_third_party: bool = True,
) -> list[LeaderboardRow]:
    """The board, from one query: a window function numbers each model's runs by the ranking
    rule and only each model's first comes back, so Python handles O(models) rows, not one
    per run."""
    pick = sa.func.row_number().over(
        partition_by=col(Evaluation.model_name),
        order_by=[col(getattr(Evaluation, name)).desc() for name in _RANKING],
    )
    query = (
        runs_query(
            principal,
            Evaluation.id,
            Evaluation.model_name,
            col(Evaluation.reward_mean).label("reward_mean"),
            col(Evaluation.reward_stderr).label("reward_stderr"),
            Evaluation.n_examples,
            Evaluation.n_rollouts,
            Evaluation.n_errors,
            Evaluation.env_version,
            Evaluation.finalized_at,
            Evaluation.created_at,
            User.username,
            third_party_clause().label("third_party"),
            pick.label("pick"),
        )
        .join(User, col(User.id) == col(Evaluation.user_id))
        .where(
            Evaluation.environment_id == env.id,
            Evaluation.status == EvaluationStatus.COMPLETED,
            # A mean that is not a score the hub accepts (a row from before its rules) never
            # ranks; NaN fails BETWEEN on PostgreSQL, and SQLite stores it as NULL.
            col(Evaluation.reward_mean).between(-MAX_ABS_SCORE, MAX_ABS_SCORE),
            col(Evaluation.hidden_at).is_(None),
        )
    )
    if version:
        query = query.where(Evaluation.env_version == version)
    if not include_third_party:
        query = query.where(third_party_clause().is_(False))
    runs = query.subquery()
    ordered = session.execute(  # rows, not scalars (sqlmodel's `exec` of one selectable)
        sa.select(runs)
        .where(runs.c.pick == 1)
        .order_by(*(runs.c[name].desc() for name in _RANKING))
    ).all()
    ranks = _tie_ranks([_interval(run) for run in ordered])
    sizes: dict[int, int] = {}
    for rank in ranks:
        sizes[rank] = sizes.get(rank, 0) + 1
    return [
        LeaderboardRow(
            rank=rank,
            model=run.model_name,
            evaluation_id=run.id,
            mean_reward=float(run.reward_mean),
            stderr=_stderr(run),
            n=run.n_examples,
            rollouts=run.n_rollouts,
            errors=run.n_errors,
            env_version=run.env_version,
            date=run.finalized_at or run.created_at,
            user=run.username,
            third_party=bool(run.third_party),
            ci_low=_interval(run)[0],
            ci_high=_interval(run)[1],
            tied=sizes[rank] > 1,
        )
        for run, rank in zip(ordered, ranks, strict=True)
    ]


def _interval(run: Any) -> tuple[float, float]:
    """mean ± 1.96·stderr (a single point when the run has no standard error)."""
    half = _Z95 * (_stderr(run) or 0.0)
    return float(run.reward_mean) - half, float(run.reward_mean) + half


def _stderr(run: Any) -> float | None:
    """The run's standard error, or None where the stored one is not a finite, positive score."""
    stderr = finite_score(run.reward_stderr)
    return stderr if stderr is not None and stderr >= 0 else None


def _tie_ranks(intervals: list[tuple[float, float]]) -> list[int]:
    """Competition ranks over rows sorted best first: a row whose interval reaches the lower
    end of its group leader's interval shares the leader's rank."""
    ranks: list[int] = []
    leader_low = 0.0
    for position, (_low, high) in enumerate(intervals, start=1):
        if ranks and high >= leader_low:
            ranks.append(ranks[-1])
            continue
        ranks.append(position)
        leader_low = intervals[position - 1][0]
    return ranks
