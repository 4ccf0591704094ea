"""Who may read an evaluation run or push one, in Python (one row) and in SQL (a listing): the
run's access policy, kept with the resource, on top of its environment's (registry.access).
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlmodel import col

from hub_server.accounts.auth import Principal
from hub_server.evals.models import Evaluation
from hub_server.registry.access import can_read, readable_environments, scopes_cover_environments
from hub_server.registry.models import Environment
from registry_index.schemas.environments import Visibility


def can_read_evaluation(principal: Principal | None, evaluation: Evaluation) -> bool:
    """A run is readable when its environment is, and it is public or the reader pushed it
    (through a token whose scopes cover that environment: `upload:alice/foo` reads no private
    run of another environment)."""
    env = evaluation.environment
    if not can_read(principal, env.owner, env):
        return False
    if evaluation.is_public:
        return True
    if principal is None or evaluation.user_id != principal.user.id:
        return False
    return principal.scope_reads(env.owner.name, env.normalized_name)


def can_push_results(principal: Principal, env: Environment) -> bool:
    """Pushing results needs scope `all` or an upload scope naming this environment's owner.

    Anyone may evaluate a public environment, so owner membership is not required; a
    read-only token can never write.
    """
    return principal.scope_writes(env.owner.name, env.normalized_name)


def readable_evaluations(principal: Principal | None) -> sa.ColumnElement[bool]:
    """SQL form of `can_read_evaluation`; needs `Environment` joined to `Evaluation`."""
    if principal is None:
        return sa.and_(
            col(Evaluation.is_public).is_(True), col(Environment.visibility) == Visibility.PUBLIC
        )
    # One's own private runs are readable only through a token whose scopes cover the env.
    own = sa.and_(
        col(Evaluation.user_id) == principal.user.id, scopes_cover_environments(principal)
    )
    return sa.and_(
        sa.or_(col(Evaluation.is_public).is_(True), own), readable_environments(principal)
    )
