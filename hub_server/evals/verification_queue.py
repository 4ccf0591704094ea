"""Which run the hub re-scores next: accounts in turn, so no tenant can hold everyone else's.

First in, first out let one account's slow rubrics hold every other account's verification
(N runs queued ahead delayed everyone by N timeouts). The queue is fair instead:

- **accounts in turn**: the next run is the waiting run of the account served least recently
  (its last verification started longest ago, or never), and within an account the
  environment served least recently, then the oldest run;
- **one at a time per account**: an account with a run under way is not served again until
  it ends, so its other runs wait behind everyone else's, never in front of them;
- **a time budget per account**: an account that has used `verify_account_seconds_per_hour`
  of verification in the last hour waits until its usage falls under it;
- **a bounded queue per account**: a run finalized while its account already has
  `verify_max_pending_per_account` runs waiting is not queued (`skipped`, with the reason).

So with one worker an account's run waits for at most one run of each other account ahead
of it, however many each has queued. The queue is computed from the `Evaluation` rows (no
table of its own), so it holds across restarts and workers; one claim per account is
enforced in the database (the account's user row locked, then a conditional update), not
by the process that computed it. `position()` tells a waiting run where it stands.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy.engine import CursorResult
from sqlmodel import Session, col, func, select

from hub_server.accounts.models import User
from hub_server.core.ids import utcnow
from hub_server.core.settings import HubSettings
from hub_server.evals.models import Evaluation, VerificationStatus

BUDGET_WINDOW = timedelta(hours=1)
_NEVER = datetime.min.replace(tzinfo=UTC)


def _aware(moment: datetime | None) -> datetime | None:
    """Timestamps come back naive from SQLite and aware from PostgreSQL; both are UTC."""
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Waiting:
    """A run that may be claimed: pending, or left running by a worker that died."""

    id: str
    account: str
    environment: str
    queued_at: datetime
    attempts: int


@dataclass(frozen=True)
class Queue:
    """The waiting runs in the order the hub will take them, and who must wait for what."""

    order: list[Waiting]
    busy: frozenset[str]
    """Accounts with a run under way: none of their runs is claimed until it ends."""
    over_budget: dict[str, datetime]
    """Accounts past their hourly budget, and when they are under it again."""


def waiting_condition(settings: HubSettings, now: datetime) -> sa.ColumnElement[bool]:
    """Pending, or running past twice the timeout (its worker died)."""
    stale = now - timedelta(seconds=2 * settings.verify_timeout_seconds)
    return sa.or_(
        col(Evaluation.verification) == VerificationStatus.PENDING,
        sa.and_(
            col(Evaluation.verification) == VerificationStatus.RUNNING,
            col(Evaluation.verification_started_at) < stale,
        ),
    )


def _under_way(settings: HubSettings, now: datetime) -> sa.ColumnElement[bool]:
    stale = now - timedelta(seconds=2 * settings.verify_timeout_seconds)
    return sa.and_(
        col(Evaluation.verification) == VerificationStatus.RUNNING,
        col(Evaluation.verification_started_at) >= stale,
    )


def snapshot(session: Session, settings: HubSettings, now: datetime | None = None) -> Queue:
    """The queue as the database holds it now."""
    now = now or utcnow()
    rows = session.execute(
        sa.select(
            col(Evaluation.id), col(Evaluation.user_id), col(Evaluation.environment_id),
            col(Evaluation.finalized_at), col(Evaluation.created_at),
            col(Evaluation.verification_attempts),
        ).where(waiting_condition(settings, now))
    ).all()  # fmt: skip
    waiting = [
        Waiting(run, user, env, _aware(finalized or created) or now, attempts)
        for run, user, env, finalized, created, attempts in rows
    ]
    accounts = sorted({w.account for w in waiting})
    if not accounts:
        return Queue([], frozenset(), {})
    busy = frozenset(
        session.exec(
            select(Evaluation.user_id)
            .where(col(Evaluation.user_id).in_(accounts), _under_way(settings, now))
            .distinct()
        ).all()
    )
    served: dict[tuple[str, str], datetime] = {}
    for user, env, last in session.exec(
        select(Evaluation.user_id, Evaluation.environment_id,
               func.max(Evaluation.verification_started_at))
        .where(col(Evaluation.user_id).in_(accounts),
               col(Evaluation.verification_started_at).is_not(None))
        .group_by(col(Evaluation.user_id), col(Evaluation.environment_id))
    ).all():  # fmt: skip
        served[(user, env)] = _aware(last) or _NEVER
    over_budget = _over_budget(session, settings, accounts, now)
    eligible = [w for w in waiting if w.account not in over_budget]
    return Queue(fair_order(eligible, served), busy, over_budget)


def _over_budget(
    session: Session, settings: HubSettings, accounts: Sequence[str], now: datetime
) -> dict[str, datetime]:
    """Accounts whose verifications took more than the budget within the last hour, and when
    enough of that time leaves the window for them to be served again."""
    budget = settings.verify_account_seconds_per_hour
    since = now - BUDGET_WINDOW
    spans: dict[str, list[tuple[datetime, datetime]]] = defaultdict(list)
    for user, started, ended in session.exec(
        select(Evaluation.user_id, Evaluation.verification_started_at, Evaluation.verified_at)
        .where(col(Evaluation.user_id).in_(accounts),
               col(Evaluation.verification_started_at).is_not(None),
               sa.or_(col(Evaluation.verified_at) >= since,
                      col(Evaluation.verification) == VerificationStatus.RUNNING))
    ).all():  # fmt: skip
        start, end = _aware(started), _aware(ended)
        assert start is not None
        if end is None or end < start:  # under way, or its worker died (charged until stale)
            end = min(now, start + timedelta(seconds=2 * settings.verify_timeout_seconds))
        spans[user].append((max(start, since), min(end, now)))
    blocked: dict[str, datetime] = {}
    for user, parts in spans.items():
        used = sum(max(0.0, (b - a).total_seconds()) for a, b in parts)
        if used < budget:
            continue
        # The earliest moment the time inside the window falls under the budget: drop the
        # oldest spans' time as the window slides past it.
        excess = used - budget
        free_at = now
        for a, b in sorted(parts):
            length = max(0.0, (b - a).total_seconds())
            if length > excess:
                free_at = a + timedelta(seconds=excess) + BUDGET_WINDOW
                break
            excess -= length
            free_at = b + BUDGET_WINDOW
        blocked[user] = free_at
    return blocked


def fair_order(
    waiting: Iterable[Waiting], served: dict[tuple[str, str], datetime]
) -> list[Waiting]:
    """Round-robin: accounts in the order they were last served (never first), each giving
    one run per round; an account's runs alternate between its environments the same way."""
    by_account: dict[str, list[Waiting]] = defaultdict(list)
    for run in waiting:
        by_account[run.account].append(run)
    last: dict[str, datetime] = defaultdict(lambda: _NEVER)
    for (account, _env), moment in served.items():
        last[account] = max(last[account], moment)
    lanes = []
    for account, runs in by_account.items():
        ordered = _account_order(runs, served)
        lanes.append(((last[account], ordered[0].queued_at, account), ordered))
    return _round_robin(lanes)


def _account_order(runs: list[Waiting], served: dict[tuple[str, str], datetime]) -> list[Waiting]:
    by_env: dict[str, list[Waiting]] = defaultdict(list)
    for run in sorted(runs, key=lambda r: (r.queued_at, r.id)):
        by_env[run.environment].append(run)
    return _round_robin(
        ((served.get((first.account, env), _NEVER), first.queued_at, env), env_runs)
        for env, env_runs in by_env.items()
        for first in env_runs[:1]
    )


def _round_robin(
    lanes: Iterable[tuple[tuple[datetime, datetime, str], list[Waiting]]],
) -> list[Waiting]:
    """One run from each lane per round, lanes in the order of their keys."""
    queues = [deque(runs) for _key, runs in sorted(lanes, key=lambda lane: lane[0])]
    order: list[Waiting] = []
    while queues:
        order.extend(queue.popleft() for queue in queues)
        queues = [queue for queue in queues if queue]
    return order


def try_claim(session: Session, settings: HubSettings, run: Waiting) -> bool:
    """Claim `run` if it is still waiting and its account has no run under way; commits.

    The account's user row is locked first (PostgreSQL: concurrent claims for one account
    queue on it; SQLite: writes are serialised anyway), so the "none under way" check and the
    claim are one step for every worker."""
    now = utcnow()
    session.exec(select(User.id).where(User.id == run.account).with_for_update())
    other = sa.inspect(Evaluation).local_table.alias()
    claimed = session.execute(
        sa.update(Evaluation)
        .where(
            col(Evaluation.id) == run.id,
            waiting_condition(settings, now),
            ~sa.exists().where(
                other.c.user_id == run.account,
                other.c.verification == VerificationStatus.RUNNING,
                other.c.verification_started_at
                >= now - timedelta(seconds=2 * settings.verify_timeout_seconds),
            ),
        )
        .values(
            verification=VerificationStatus.RUNNING,
            verification_started_at=now,
            verification_attempts=col(Evaluation.verification_attempts) + 1,
        )
    )
    session.commit()
    return cast(CursorResult[Any], claimed).rowcount == 1


def can_queue(session: Session, settings: HubSettings, account: str) -> bool:
    """Whether `account` has room for one more waiting run."""
    waiting = session.exec(
        select(func.count())
        .select_from(Evaluation)
        .where(
            col(Evaluation.user_id) == account,
            col(Evaluation.verification) == VerificationStatus.PENDING,
        )
    ).one()
    return int(waiting) < settings.verify_max_pending_per_account


@dataclass(frozen=True)
class Place:
    """Where a waiting run stands: `position` 1 is next (None: its account is over budget)."""

    position: int | None
    ahead: int
    detail: str


def position(session: Session, settings: HubSettings, run_id: str) -> Place | None:
    """Where `run_id` stands in the queue, or None when it is not waiting."""
    queue = snapshot(session, settings)
    for index, run in enumerate(queue.order):
        if run.id != run_id:
            continue
        if index == 0 and run.account not in queue.busy:
            return Place(1, 0, "next in line for verification")
        detail = f"waiting for verification: {index} run{'s' if index != 1 else ''} ahead"
        if run.account in queue.busy:
            detail += " (another run of this account is being verified; one at a time per account)"
        return Place(index + 1, index, detail)
    row = session.get(Evaluation, run_id)
    if row is not None and row.user_id in queue.over_budget:
        when = queue.over_budget[row.user_id].strftime("%H:%M:%S UTC")
        budget = settings.verify_account_seconds_per_hour
        return Place(None, 0, f"waiting: this account used its {budget:g} s of verification in "
                              f"the last hour; it is served again from {when}")  # fmt: skip
    return None
