"""Per-environment leaderboard: the best finalized run of each model, ranked by what its
samples can support.

A run's mean alone ranked a 1-example run at 1.0 above a 400-example run at 0.905, as if one
sample were proof. Runs are ranked by the **lower end of their 95% interval**, mean −
1.96·SE, where SE is the run's own clustered standard error but never less than the board's
per-example spread divided by √n (σ/√n): a run of few examples cannot claim more precision
than the environment's examples show (σ is pooled from every ranked run with a standard
error: σ² = Σ SEᵢ²·nᵢ·(nᵢ−1) / Σ (nᵢ−1)). A run without a standard error on a board where
no run has one has an unbounded interval. The same rule picks each model's best run; ties
go to more scored rollouts, then to the newer run.

Rows whose intervals reach the lower end of their group leader's share its rank and are
`tied`, so a difference the samples cannot support is never shown as a ranking. Errored
rollouts are excluded (never counted as 0); open, abandoned and owner-hidden runs never rank.
Runs pushed by people outside the environment's owner are marked `third_party` and can be
left out; runs the hub re-scored itself are marked `verified`, and the board can show only
those (`evals.verification`); a run it re-scored differently (`disagreed`) never ranks. docs/eval.md explains the board to its readers.
"""

from __future__ import annotations

import json
import math
from typing import Any

import sqlalchemy as sa
from sqlmodel import Session, col

from hub_server.accounts.auth import Principal
from hub_server.accounts.models import User
from hub_server.evals.integrity import MAX_ABS_SCORE, finite_score
from hub_server.evals.models import Evaluation, EvaluationStatus, VerificationStatus
from hub_server.evals.service import runs_query, third_party_clause
from hub_server.registry.models import Environment
from registry_index.schemas.leaderboard import LeaderboardRow

# Two-sided 95% normal quantile.
_Z95 = 1.96
# Stands for "no spread known": a run without a standard error then has no lower bound.
_UNKNOWN_SPREAD = 1e300


def _scored(
    env: Environment, principal: Principal | None, version: str | None, first_party_only: bool,
    verified_only: bool,
) -> Any:  # fmt: skip
    """The filter every ranked run passes (as a `runs_query` of `columns`)."""

    def query(*columns: Any) -> Any:
        found = runs_query(principal, *columns).where(
            Evaluation.environment_id == env.id,
            Evaluation.status == EvaluationStatus.COMPLETED,
            # A mean that is not a score the hub accepts (a row from before its rules) never
            # ranks; NaN fails BETWEEN on PostgreSQL, and SQLite stores it as NULL.
            col(Evaluation.reward_mean).between(-MAX_ABS_SCORE, MAX_ABS_SCORE),
            col(Evaluation.hidden_at).is_(None),
            # The hub re-scored it and its scores are not the environment's: it never ranks.
            sa.or_(
                col(Evaluation.verification).is_(None),
                col(Evaluation.verification) != VerificationStatus.DISAGREED,
            ),
        )
        if version:
            found = found.where(Evaluation.env_version == version)
        if first_party_only:
            found = found.where(third_party_clause().is_(False))
        if verified_only:
            found = found.where(col(Evaluation.verification) == VerificationStatus.VERIFIED)
        return found

    return query


def _spread(session: Session, runs: Any) -> float | None:
    """σ, the per-example standard deviation pooled over the runs with a standard error."""
    stderr = col(Evaluation.reward_stderr)
    n = col(Evaluation.n_examples)
    weighted, weights = session.execute(
        runs(
            sa.func.sum(stderr * stderr * n * (n - 1)),
            sa.func.sum(n - 1),
        ).where(stderr.between(0, MAX_ABS_SCORE), n >= 2)
    ).one()
    if not weights or weighted is None:
        return None
    variance = float(weighted) / float(weights)
    return math.sqrt(variance) if math.isfinite(variance) and variance >= 0 else None


def _larger(a: Any, b: Any) -> Any:
    """SQL max(a, b) on SQLite and PostgreSQL alike."""
    return sa.case((a > b, a), else_=b)


def leaderboard(
    session: Session,
    env: Environment,
    principal: Principal | None,
    version: str | None = None,
    *,
    include_third_party: bool = True,
    verified_only: bool = False,
) -> list[LeaderboardRow]:
    """The board, from two queries: the pooled spread σ, then a window function that numbers
    each model's runs by the ranking rule; only each model's first comes back, so Python
    handles O(models) rows, not one per run."""
    runs = _scored(env, principal, version, not include_third_party, verified_only)
    spread = _spread(session, runs)
    own = sa.func.coalesce(col(Evaluation.reward_stderr), 0.0)
    floor = sa.literal(_UNKNOWN_SPREAD if spread is None else spread) / sa.func.sqrt(
        _larger(col(Evaluation.n_examples), 1)
    )
    effective = _larger(own, floor)
    lower = col(Evaluation.reward_mean) - _Z95 * effective
    ranking = (lower, col(Evaluation.n_rollouts), col(Evaluation.finalized_at), col(Evaluation.id))
    pick = sa.func.row_number().over(
        partition_by=col(Evaluation.model_name), order_by=[c.desc() for c in ranking]
    )
    picked = (
        runs(
            Evaluation.id,
            Evaluation.model_name,
            col(Evaluation.reward_mean).label("reward_mean"),
            col(Evaluation.reward_stderr).label("reward_stderr"),
            effective.label("effective_stderr"),
            lower.label("lower"),
            Evaluation.n_examples,
            Evaluation.n_rollouts,
            Evaluation.n_errors,
            Evaluation.env_version,
            Evaluation.finalized_at,
            Evaluation.created_at,
            Evaluation.verification,
            User.username,
            third_party_clause().label("third_party"),
            pick.label("pick"),
        )
        .join(User, col(User.id) == col(Evaluation.user_id))
        .subquery()
    )
    ordered = session.execute(  # rows, not scalars (sqlmodel's `exec` of one selectable)
        sa.select(picked)
        .where(picked.c.pick == 1)
        .order_by(
            *(picked.c[name].desc() for name in ("lower", "n_rollouts", "finalized_at", "id"))
        )
    ).all()
    served = _served_models(session, [run.id for run in ordered])
    intervals = [_interval(run) for run in ordered]
    ranks = _tie_ranks(intervals)
    sizes: dict[int, int] = {}
    for rank in ranks:
        sizes[rank] = sizes.get(rank, 0) + 1
    return [
        LeaderboardRow(
            rank=rank,
            model=run.model_name,
            served_model=served.get(run.id),
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
            ci_low=interval[0],
            ci_high=interval[1],
            tied=sizes[rank] > 1,
            verified=run.verification == VerificationStatus.VERIFIED,
        )
        for run, rank, interval in zip(ordered, ranks, intervals, strict=True)
    ]


def _served_models(session: Session, ids: list[str]) -> dict[str, str]:
    """The `served_model` each ranked run's metadata records (the name the model's server
    answered as, beside the alias it was asked by): read for the board's rows only."""
    if not ids:
        return {}
    rows = session.execute(
        sa.select(col(Evaluation.id), col(Evaluation.metadata_json)).where(
            col(Evaluation.id).in_(ids)
        )
    ).all()
    served = {}
    for evaluation_id, metadata_json in rows:
        name = json.loads(metadata_json or "{}").get("served_model")
        if isinstance(name, str) and name:
            served[evaluation_id] = name
    return served


def _stderr(run: Any) -> float | None:
    """The run's standard error, or None where the stored one is not a finite, positive score."""
    stderr = finite_score(run.reward_stderr)
    return stderr if stderr is not None and stderr >= 0 else None


def _interval(run: Any) -> tuple[float, float]:
    """mean ± 1.96·(the effective standard error), clipped to what a score can be."""
    half = _Z95 * min(float(run.effective_stderr), MAX_ABS_SCORE)
    mean = float(run.reward_mean)
    return max(mean - half, -MAX_ABS_SCORE), min(mean + half, MAX_ABS_SCORE)


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
