"""Evaluation results: the operations behind the API and the web pages.

Write order follows the hub's rule, blob first, row second: a batch's gzip JSONL blob is
stored (content-addressed, atomically) before the row that lists it is committed, so a crash
leaves at most an unreferenced blob, never a row pointing at nothing. Every write starts by
updating the evaluation row, which serialises concurrent writers to one evaluation (a row
lock on PostgreSQL, the write lock on SQLite) before duplicates are checked.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from packaging.utils import canonicalize_version
from packaging.version import InvalidVersion
from packaging.version import Version as PepVersion
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError as RowConflict
from sqlmodel import Session, col, select

from hub_server.accounts.access import can_read, readable_environment
from hub_server.accounts.auth import Principal
from hub_server.accounts.models import Membership, Owner
from hub_server.core.blobstore import BlobStorage, content_key
from hub_server.core.errors import HubError
from hub_server.core.ids import utcnow
from hub_server.evals.integrity import IntegrityError, check_scores
from hub_server.evals.models import Evaluation, EvaluationBatch, EvaluationStatus
from hub_server.evals.samples import (
    SampleError,
    assign_keys,
    decode_batch,
    encode_batch,
    validate_batch,
)
from hub_server.evals.stats import add_stored, batch_partial, merge_partial, summary_from_json
from hub_server.registry.models import Environment, Version
from registry_index import resolve, scopes
from registry_index.names import normalize
from registry_index.schemas.environments import Visibility
from registry_index.schemas.evals import CreateEvaluation, EnvironmentRef
from registry_index.summary import Summary, SummaryBuilder


class EvalError(HubError):
    """A request the hub refuses; `status` is the HTTP status, the message says how to fix it.

    A `HubError`, so the app's error handler answers `{"detail": message}` with that status.
    """

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _not_found(what: str) -> EvalError:
    return EvalError(404, what)


# -- visibility --------------------------------------------------------------------------


def can_read_environment(session: Session, env: Environment, principal: Principal | None) -> bool:
    """The hub's rule (auth.Principal.can_read): public, or private and within the token's reach."""
    owner = session.get(Owner, env.owner_id)
    return owner is not None and can_read(principal, owner, env)


def can_read_evaluation(
    session: Session, evaluation: Evaluation, env: Environment, principal: Principal | None
) -> bool:
    """A run is readable when its environment is, and it is public or the reader pushed it
    (through a token whose scopes cover that environment: `upload:alice/foo` reads no private
    run of another environment)."""
    if not can_read_environment(session, env, principal):
        return False
    if evaluation.is_public:
        return True
    if principal is None or evaluation.user_id != principal.user.id:
        return False
    owner = session.get(Owner, env.owner_id)
    return owner is not None and principal.scope_reads(owner.name, env.normalized_name)


def can_write_results(principal: Principal, owner: Owner, env: Environment) -> bool:
    """Pushing results needs scope `all` or an upload scope naming this environment's owner.

    Anyone may evaluate a public environment, so owner membership is not required; a
    read-only token can never write.
    """
    return principal.scope_writes(owner.name, env.normalized_name)


def find_environment(
    session: Session, owner: str, name: str, principal: Principal | None
) -> Environment:
    """`owner/name` as the reader may see it; private ones of others are exactly like missing ones."""
    return readable_environment(session, principal, owner, name)[1]


def slug_of(session: Session, env: Environment) -> tuple[str, str]:
    owner = session.get(Owner, env.owner_id)
    return (owner.name if owner else "?", env.name)


# -- versions ----------------------------------------------------------------------------


def _pep440(text: str) -> PepVersion | None:
    try:
        return PepVersion(text)
    except InvalidVersion:
        return None


def latest_version(session: Session, env: Environment) -> Version | None:
    """The version `@latest` means, by the rule install uses (`registry_index.resolve`)."""
    versions = [v for v in session.exec(select(Version).where(Version.environment_id == env.id))]
    usable = [(p, v) for v in versions if (p := _pep440(v.version)) is not None]
    chosen = resolve.latest_version([(p, v.yanked) for p, v in usable])
    return next((v for p, v in usable if p == chosen), None)


def _resolve_version(session: Session, env: Environment, ref: EnvironmentRef) -> Version:
    owner, name = slug_of(session, env)
    if ref.version_id:
        version = session.get(Version, ref.version_id)
        if version is None or version.environment_id != env.id:
            raise _not_found(f"Environment {owner}/{name} has no version with id {ref.version_id}.")
        return version
    if ref.version in (None, "", "latest"):
        found = latest_version(session, env)
        if found is None:
            raise _not_found(
                f"Environment {owner}/{name} has no published version yet; "
                "push one with `prime env push` before uploading results."
            )
        return found
    wanted = canonicalize_version(ref.version)
    for version in session.exec(select(Version).where(Version.environment_id == env.id)):
        if version.version == ref.version or version.canonical_version == wanted:
            return version
    known = ", ".join(
        sorted(
            (
                v.version
                for v in session.exec(select(Version).where(Version.environment_id == env.id))
            ),
            key=lambda text: _pep440(text) or PepVersion("0"),
        )
    )
    raise _not_found(
        f"Environment {owner}/{name} has no version {ref.version!r}"
        + (f"; known versions: {known}." if known else ".")
    )


def _resolve_environment(
    session: Session, ref: EnvironmentRef, principal: Principal
) -> tuple[Environment, EnvironmentRef]:
    """The referenced environment, and the reference with an `owner/name@version` slug split."""
    if ref.slug:
        owner, sep, name = ref.slug.partition("/")
        name, _, pinned = name.partition("@")
        if not sep or not owner or not name or "/" in name:
            raise EvalError(400, f"Environment slug {ref.slug!r} is not of the form owner/name.")
        if pinned and not ref.version and not ref.version_id:
            ref = ref.model_copy(update={"version": pinned})
        return find_environment(session, owner, name, principal), ref
    found = session.get(Environment, ref.id)
    if found is None or not can_read_environment(session, found, principal):
        raise _not_found(f"Environment with id {ref.id} not found.")
    return found, ref


# -- create / push / finalize ------------------------------------------------------------


def batch_key(sha256: str) -> str:
    """Sample blobs live under their own prefix, apart from package files (and their clean-up)."""
    return f"evals/{content_key(sha256)}"


def create_evaluation(
    session: Session, request: CreateEvaluation, principal: Principal
) -> Evaluation:
    """A new, open run linked to one exact environment version (`latest` resolved now)."""
    env, ref = _resolve_environment(session, request.environments[0], principal)
    owner = session.get(Owner, env.owner_id)
    if owner is None or not can_write_results(principal, owner, env):
        raise EvalError(
            403,
            f"This token may not push results for {owner.name if owner else '?'}/{env.name}: "
            "use a token with scope 'all' (or an upload scope for this environment).",
        )
    version = _resolve_version(session, env, ref)
    if request.client_run_id:
        resumed = _resume(session, principal, request, env)
        if resumed is not None:
            return resumed
    evaluation = Evaluation(
        client_run_id=request.client_run_id,
        name=request.name,
        environment_id=env.id,
        version_id=version.id,
        env_version=version.version,
        user_id=principal.user.id,
        model_name=request.model_name,
        framework=request.framework,
        is_public=request.is_public,
        tags_json=json.dumps(request.tags),
        metadata_json=json.dumps(request.extra_metadata(), default=str),
        client_metrics_json=json.dumps(request.metrics, default=str),
    )
    session.add(evaluation)
    try:
        session.commit()
    except RowConflict:  # the same client run id, created concurrently: resume that run
        session.rollback()
        resumed = _resume(session, principal, request, env)
        if resumed is None:
            raise
        return resumed
    return evaluation


def _resume(
    session: Session, principal: Principal, request: CreateEvaluation, env: Environment
) -> Evaluation | None:
    """The caller's run with this `client_run_id`, if any (a retried `prime eval push`)."""
    existing = session.exec(
        select(Evaluation).where(
            Evaluation.user_id == principal.user.id,
            Evaluation.client_run_id == request.client_run_id,
        )
    ).first()
    if existing is None:
        return None
    if existing.environment_id != env.id or existing.model_name != request.model_name:
        raise EvalError(
            409,
            f"client_run_id {request.client_run_id!r} already names evaluation {existing.id} "
            "of another environment or model; send a new id for a new run.",
        )
    return existing


def _writable(
    session: Session, evaluation_id: str, principal: Principal, *, check_open: bool = True
) -> Evaluation:
    """Lock the run for writing and check the caller may write to it (and it is still open,
    unless the caller first looks for a retry of a write already done)."""
    touched = session.execute(
        sa.update(Evaluation).where(col(Evaluation.id) == evaluation_id).values(updated_at=utcnow())
    )
    evaluation = session.get(Evaluation, evaluation_id, populate_existing=True)
    env = session.get(Environment, evaluation.environment_id) if evaluation else None
    if touched.rowcount == 0 or evaluation is None or env is None:  # type: ignore[attr-defined]
        raise _not_found(f"Evaluation {evaluation_id} not found.")
    if not can_read_evaluation(session, evaluation, env, principal):
        raise _not_found(f"Evaluation {evaluation_id} not found.")
    if evaluation.user_id != principal.user.id:
        raise EvalError(
            403, f"Evaluation {evaluation_id} was created by another user; only they can add to it."
        )
    owner = session.get(Owner, env.owner_id)
    if owner is None or not can_write_results(principal, owner, env):
        raise EvalError(
            403,
            f"This token may not write results of {owner.name if owner else '?'}/{env.name}: "
            "use a token with scope 'all' or an upload scope for this environment "
            "(a read token never writes).",
        )
    if check_open:
        _require_open(evaluation)
    return evaluation


def _require_open(evaluation: Evaluation) -> None:
    evaluation_id = evaluation.id
    if evaluation.status == EvaluationStatus.ABANDONED:
        raise EvalError(
            409,
            f"Evaluation {evaluation_id} was abandoned (nothing pushed for too long) and is "
            "closed; create a new evaluation to push these results.",
        )
    if evaluation.status != EvaluationStatus.RUNNING:
        raise EvalError(
            409,
            f"Evaluation {evaluation_id} was already finalized at "
            f"{evaluation.finalized_at:%Y-%m-%d %H:%M:%S} UTC; it can no longer change. "
            "Create a new evaluation to push more results.",
        )


def _taken_keys(session: Session, evaluation_id: str) -> set[tuple[int, int]]:
    taken: set[tuple[int, int]] = set()
    for keys_json in session.exec(
        select(EvaluationBatch.keys_json).where(EvaluationBatch.evaluation_id == evaluation_id)
    ):
        taken.update((int(e), int(r)) for e, r in json.loads(keys_json))
    return taken


def append_samples(
    session: Session, store: BlobStorage, evaluation_id: str, principal: Principal, raw_samples: Any
) -> EvaluationBatch:
    """Validate one batch, store it as a gzip JSONL blob, and list it on the run.

    A batch identical to one already stored on the run (a client retrying after a lost
    answer) is accepted once: the stored batch is answered and nothing is added.
    """
    if not isinstance(raw_samples, list):
        raise EvalError(400, 'The body must be {"samples": [ {…rollout record…}, … ]}.')
    try:
        records = validate_batch(raw_samples)
    except SampleError as exc:
        raise EvalError(exc.status, str(exc)) from None
    request_sha256 = hashlib.sha256(encode_batch(records)).hexdigest()
    try:
        evaluation = _writable(session, evaluation_id, principal, check_open=False)
        try:
            check_scores(records, reward_range(session.get(Environment, evaluation.environment_id)))
        except IntegrityError as exc:
            raise EvalError(400, str(exc)) from None
        retried = session.exec(
            select(EvaluationBatch).where(
                EvaluationBatch.evaluation_id == evaluation_id,
                EvaluationBatch.request_sha256 == request_sha256,
            )
        ).first()
        if retried is not None:  # even on a run finalized since: the retry changes nothing
            session.rollback()
            return retried
        _require_open(evaluation)
        try:
            assign_keys(records, _taken_keys(session, evaluation_id))
        except SampleError as exc:
            raise EvalError(exc.status, str(exc)) from None
        blob = encode_batch(records)
        key = batch_key(hashlib.sha256(blob).hexdigest())
        store.put_bytes(blob, key)
        seq = session.exec(
            select(sa.func.count())
            .select_from(EvaluationBatch)
            .where(EvaluationBatch.evaluation_id == evaluation_id)
        ).one()
        batch = EvaluationBatch(
            evaluation_id=evaluation_id,
            seq=int(seq) + 1,
            blob_key=key,
            request_sha256=request_sha256,
            sample_count=len(records),
            keys_json=json.dumps([[r["example_index"], r["rollout_index"]] for r in records]),
            partial_json=json.dumps(batch_partial(records)),
        )
        evaluation.sample_count += len(records)
        session.add(batch)
        session.add(evaluation)
        session.commit()
    except BaseException:
        session.rollback()
        raise
    return batch


def _batches(session: Session, evaluation_id: str) -> list[EvaluationBatch]:
    return list(
        session.exec(
            select(EvaluationBatch)
            .where(EvaluationBatch.evaluation_id == evaluation_id)
            .order_by(col(EvaluationBatch.seq))
        )
    )


def iter_samples(store: BlobStorage, batches: list[EvaluationBatch]) -> Iterator[dict[str, Any]]:
    for batch in batches:
        with store.open(batch.blob_key) as handle:
            yield from decode_batch(handle.read())


def finalize_evaluation(
    session: Session,
    store: BlobStorage,
    evaluation_id: str,
    principal: Principal,
    metrics: dict[str, Any] | None,
) -> Evaluation:
    """Close the run: merge the batches' partial sums into the summary; only now can it rank."""
    try:
        evaluation = _writable(session, evaluation_id, principal, check_open=False)
        if evaluation.status == EvaluationStatus.COMPLETED and evaluation.client_run_id is not None:
            session.rollback()  # a retried push finalizing its run again: already done
            return evaluation
        _require_open(evaluation)
        builder = SummaryBuilder()
        for batch in _batches(session, evaluation_id):
            if not merge_partial(builder, batch.partial_json):
                add_stored(builder, iter_samples(store, [batch]))
        summary = builder.summary()
        evaluation.status = EvaluationStatus.COMPLETED
        evaluation.finalized_at = utcnow()
        evaluation.summary_json = summary.model_dump_json()
        evaluation.mean_reward = summary.reward_mean
        evaluation.stderr = summary.reward_stderr
        evaluation.n_examples = summary.examples
        evaluation.n_rollouts = summary.scored
        evaluation.n_errors = summary.errors
        if metrics:
            merged = {**json.loads(evaluation.client_metrics_json), **metrics}
            evaluation.client_metrics_json = json.dumps(merged, default=str)
        session.add(evaluation)
        session.commit()
    except BaseException:
        session.rollback()
        raise
    return evaluation


# -- reads -------------------------------------------------------------------------------


def get_evaluation(
    session: Session, evaluation_id: str, principal: Principal | None
) -> tuple[Evaluation, Environment]:
    evaluation = session.get(Evaluation, evaluation_id)
    env = session.get(Environment, evaluation.environment_id) if evaluation else None
    if (
        evaluation is None
        or env is None
        or not can_read_evaluation(session, evaluation, env, principal)
    ):
        raise _not_found(f"Evaluation {evaluation_id} not found.")
    return evaluation, env


def visible_runs(principal: Principal | None) -> sa.ColumnElement[bool]:
    """SQL form of `can_read_evaluation`; needs `Environment` and `Owner` joined in."""
    if principal is None:
        return sa.and_(
            col(Evaluation.is_public).is_(True), col(Environment.visibility) == Visibility.PUBLIC
        )
    reach = sa.true() if principal.user.is_admin else col(Owner.id).in_(sorted(principal.owner_ids))
    scope_ok: list[sa.ColumnElement[bool]] = []
    for scope in map(scopes.parse_scope, principal.scopes):  # Scope.allows, in SQL
        if scope.owner is None:  # all, read
            scope_ok.append(sa.true())
        else:
            term = col(Owner.name) == scope.owner
            if scope.name:
                term = sa.and_(term, col(Environment.normalized_name) == scope.name)
            scope_ok.append(term)
    scope_cover = sa.or_(*scope_ok) if scope_ok else sa.false()
    # One's own private runs are readable only through a token whose scopes cover the env.
    run_ok = sa.or_(
        col(Evaluation.is_public).is_(True),
        sa.and_(col(Evaluation.user_id) == principal.user.id, scope_cover),
    )
    private_ok = sa.and_(reach, scope_cover)
    env_ok = sa.or_(col(Environment.visibility) == Visibility.PUBLIC, private_ok)
    return sa.and_(run_ok, env_ok)


def runs_query(principal: Principal | None, *columns: Any) -> Any:
    """Evaluations joined with their environment and owner, limited to what the reader may see.

    Selects `columns` when given (a leaderboard needs a few numbers, not the JSON blobs of
    every run), else the three rows.
    """
    return (
        select(*(columns or (Evaluation, Environment, Owner)))
        .select_from(Evaluation)
        .join(Environment, col(Environment.id) == col(Evaluation.environment_id))
        .join(Owner, col(Owner.id) == col(Environment.owner_id))
        .where(visible_runs(principal))
    )


@dataclass
class Page:
    items: list[tuple[Evaluation, Environment, Owner]]
    total: int


def list_evaluations(
    session: Session,
    principal: Principal | None,
    *,
    env: Environment | None,
    env_name: str | None = None,
    model: str | None,
    status: str | None,
    offset: int,
    limit: int,
) -> Page:
    """Runs the reader may see, newest first; `env_name` matches a bare name under any owner."""
    query = runs_query(principal)
    if env is not None:
        query = query.where(Evaluation.environment_id == env.id)
    if env_name:
        query = query.where(Environment.normalized_name == normalize(env_name))
    if model:
        query = query.where(Evaluation.model_name == model)
    if status:
        query = query.where(Evaluation.status == status)
    else:  # abandoned runs are not results: listed only when asked for by status
        query = query.where(Evaluation.status != EvaluationStatus.ABANDONED)
    total = session.exec(select(sa.func.count()).select_from(query.subquery())).one()
    rows = session.exec(
        query.order_by(col(Evaluation.created_at).desc(), col(Evaluation.id))
        .offset(offset)
        .limit(limit)
    ).all()
    return Page(items=[tuple(row) for row in rows], total=int(total))


def recent_runs(
    session: Session, principal: Principal | None, env: Environment, limit: int
) -> list[Any]:
    """The newest runs on `env` the reader may see: id, model, status and date only."""
    query = runs_query(
        principal,
        Evaluation.id,
        Evaluation.model_name,
        Evaluation.status,
        Evaluation.created_at,
    ).where(Evaluation.environment_id == env.id, Evaluation.status != EvaluationStatus.ABANDONED)
    return list(
        session.exec(
            query.order_by(col(Evaluation.created_at).desc(), col(Evaluation.id)).limit(limit)
        )
    )


def read_samples(
    session: Session, store: BlobStorage, evaluation: Evaluation, page: int, per_page: int
) -> list[dict[str, Any]]:
    """One page of samples in push order, decompressing only the batches that hold it."""
    start = (page - 1) * per_page
    stop = start + per_page
    wanted: list[dict[str, Any]] = []
    offset = 0
    for batch in _batches(session, evaluation.id):
        end = offset + batch.sample_count
        if end > start and offset < stop:
            with store.open(batch.blob_key) as handle:
                records = list(decode_batch(handle.read()))
            wanted.extend(records[max(start - offset, 0) : stop - offset])
        offset = end
        if offset >= stop:
            break
    return wanted


def summary_of(evaluation: Evaluation) -> Summary | None:
    if evaluation.summary_json is None:
        return None
    return summary_from_json(evaluation.summary_json)


# -- integrity and provenance -------------------------------------------------------------


def reward_range(env: Environment | None) -> tuple[float, float] | None:
    """The range the environment's owner declared for its rewards, if any."""
    if env is None or env.reward_min is None or env.reward_max is None:
        return None
    return env.reward_min, env.reward_max


def mark_abandoned(engine: Engine, after_seconds: int) -> int:
    """Close runs left `running` with no write for `after_seconds`: they never rank or list."""
    cutoff = utcnow() - timedelta(seconds=after_seconds)
    with Session(engine) as session:
        result = session.execute(
            sa.update(Evaluation)
            .where(
                col(Evaluation.status) == EvaluationStatus.RUNNING,
                col(Evaluation.updated_at) < cutoff,
            )
            .values(status=EvaluationStatus.ABANDONED)
        )
        session.commit()
        return int(result.rowcount)  # type: ignore[attr-defined]


def set_hidden(
    session: Session, evaluation_id: str, principal: Principal, hidden: bool
) -> Evaluation:
    """The environment's owner hides (or shows again) a run on their leaderboard."""
    evaluation, env = get_evaluation(session, evaluation_id, principal)
    owner = session.get(Owner, env.owner_id)
    if owner is None or not principal.can_upload(owner, env.normalized_name):
        raise EvalError(
            403,
            "Only the environment's owner (a token that may publish it) can hide or show runs "
            "on its leaderboard.",
        )
    evaluation.hidden_at = utcnow() if hidden else None
    session.add(evaluation)
    session.commit()
    return evaluation


def third_party_clause() -> Any:
    """SQL: the run's uploader is neither the owning user nor a member of the owning org.

    Needs `Owner` joined (as `runs_query` does)."""
    member = (
        sa.exists()
        .where(col(Membership.owner_id) == col(Owner.id))
        .where(col(Membership.user_id) == col(Evaluation.user_id))
    )
    first_party = sa.or_(col(Owner.user_id) == col(Evaluation.user_id), member)
    return sa.case((first_party, sa.false()), else_=sa.true())


def is_third_party(session: Session, evaluation: Evaluation, env: Environment) -> bool:
    """Python form of `third_party_clause` for one run."""
    owner = session.get(Owner, env.owner_id)
    if owner is None:
        return True
    if owner.user_id == evaluation.user_id:
        return False
    return session.get(Membership, (owner.id, evaluation.user_id)) is None
