"""Evaluation results: the operations behind the API and the web pages.

Write order follows the hub's rule, blob first, row second: a batch's gzip JSONL blob is
stored (content-addressed, atomically) before the row that lists it is committed, so a crash
leaves at most an unreferenced blob, never a row pointing at nothing. Every write starts by
updating the evaluation row, which serialises concurrent writers to one evaluation (a row
lock on PostgreSQL, the write lock on SQLite) before duplicates are checked. Who may read or
push a run is `evals.access`; which version a reference names is `registry.service`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy.engine import CursorResult, Engine
from sqlalchemy.exc import IntegrityError as RowConflict
from sqlmodel import Session, col, select

from hub_server.accounts.auth import Principal
from hub_server.accounts.models import Membership, Owner
from hub_server.core.blobstore import BlobStorage, content_key
from hub_server.core.errors import BadRequest, Conflict, Forbidden, HubError, NotFound, TooLarge
from hub_server.core.ids import utcnow
from hub_server.core.settings import HubSettings
from hub_server.evals.access import can_push_results, can_read_evaluation, readable_evaluations
from hub_server.evals.integrity import (
    IntegrityError,
    check_reward_range,
    check_rubric,
    stored_json,
)
from hub_server.evals.models import (
    Evaluation,
    EvaluationBatch,
    EvaluationStatus,
    VerificationStatus,
)
from hub_server.evals.samples import (
    MAX_BATCHES_PER_RUN,
    SampleError,
    assign_keys,
    decode_batch,
    encode_batch,
    validate_batch,
)
from hub_server.evals.stats import (
    add_stored,
    batch_partial,
    is_finite,
    merge_partial,
    summary_from_json,
)
from hub_server.evals.verification import request_verification
from hub_server.evals.verification_queue import position as queue_position
from hub_server.registry.access import can_read, readable_environment
from hub_server.registry.models import Environment, Version
from hub_server.registry.service import select_version
from hub_server.registry.views import declared_rubric
from registry_index.names import normalize
from registry_index.resolve import parse_env_id
from registry_index.schemas.evals import (
    CreateEvaluation,
    EnvironmentLink,
    EnvironmentRef,
    EvaluationInfo,
)
from registry_index.summary import Summary, SummaryBuilder


def _refused(exc: SampleError) -> HubError:
    """The hub's answer to a batch `samples` refuses (its `status`: 400, 409 or 413)."""
    kinds: dict[int, type[HubError]] = {409: Conflict, 413: TooLarge}
    return kinds.get(exc.status, BadRequest)(str(exc))


def _run_not_found(evaluation_id: str) -> NotFound:
    return NotFound(f"Evaluation {evaluation_id} not found.")


# -- environments ------------------------------------------------------------------------


def find_environment(
    session: Session, owner: str, name: str, principal: Principal | None
) -> Environment:
    """`owner/name` as the reader may see it; private ones of others are exactly like missing ones."""
    return readable_environment(session, principal, owner, name)[1]


def environment_by_slug(
    session: Session, slug: str, principal: Principal | None
) -> tuple[Environment, str | None]:
    """The environment `owner/name[@spec]` names (`registry_index.resolve`'s grammar), and the
    spec; 400 for a reference without an owner or otherwise malformed."""
    try:
        owner, name, spec = parse_env_id(slug)
    except ValueError as exc:
        raise BadRequest(
            f"Environment slug {slug!r} is not of the form owner/name: {exc}"
        ) from None
    if owner is None:
        raise BadRequest(
            f"Environment slug {slug!r} is not of the form owner/name; write it as OWNER/NAME "
            "or OWNER/NAME@VERSION (for example 'alice/wordle@1.2.0')."
        )
    return find_environment(session, owner, name, principal), spec


def environment_by_id(session: Session, env_id: str, principal: Principal | None) -> Environment:
    found = session.get(Environment, env_id)
    if found is None or not can_read(principal, found.owner, found):
        raise NotFound(f"Environment with id {env_id} not found.")
    return found


def _resolve_version(env: Environment, ref: EnvironmentRef, spec: str | None) -> Version:
    """The exact version a run is of: by id, else the version or specifier given (`@>=1.0`
    as install takes it), else the latest."""
    if ref.version_id:
        version = next((v for v in env.versions if v.id == ref.version_id), None)
        if version is None:
            raise NotFound(
                f"Environment {env.owner.name}/{env.name} has no version with id {ref.version_id}."
            )
        return version
    return select_version(env, ref.version or spec)


# -- create / push / finalize ------------------------------------------------------------


def batch_key(sha256: str) -> str:
    """Sample blobs live under their own prefix, apart from package files (and their clean-up)."""
    return f"evals/{content_key(sha256)}"


def create_evaluation(
    session: Session, request: CreateEvaluation, principal: Principal
) -> Evaluation:
    """A new, open run linked to one exact environment version (`latest` resolved now)."""
    ref = request.environments[0]
    if ref.slug:
        env, spec = environment_by_slug(session, ref.slug, principal)
    else:
        env, spec = environment_by_id(session, ref.id or "", principal), None
    if not can_push_results(principal, env):
        raise Forbidden(
            f"This token may not push results for {env.owner.name}/{env.name}: "
            "use a token with scope 'all' (or an upload scope for this environment)."
        )
    version = _resolve_version(env, ref, spec)
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
        raise Conflict(
            f"client_run_id {request.client_run_id!r} already names evaluation {existing.id} "
            "of another environment or model; send a new id for a new run."
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
    if cast(CursorResult[Any], touched).rowcount == 0 or evaluation is None:
        raise _run_not_found(evaluation_id)
    if not can_read_evaluation(principal, evaluation):
        raise _run_not_found(evaluation_id)
    if evaluation.user_id != principal.user.id:
        raise Forbidden(
            f"Evaluation {evaluation_id} was created by another user; only they can add to it."
        )
    env = evaluation.environment
    if not can_push_results(principal, env):
        raise Forbidden(
            f"This token may not write results of {env.owner.name}/{env.name}: "
            "use a token with scope 'all' or an upload scope for this environment "
            "(a read token never writes)."
        )
    if check_open:
        _require_open(evaluation)
    return evaluation


def _require_open(evaluation: Evaluation) -> None:
    evaluation_id = evaluation.id
    if evaluation.status == EvaluationStatus.ABANDONED:
        raise Conflict(
            f"Evaluation {evaluation_id} was abandoned (nothing pushed for too long) and is "
            "closed; create a new evaluation to push these results."
        )
    if evaluation.status != EvaluationStatus.RUNNING:
        raise Conflict(
            f"Evaluation {evaluation_id} was already finalized at "
            f"{evaluation.finalized_at:%Y-%m-%d %H:%M:%S} UTC; it can no longer change. "
            "Create a new evaluation to push more results."
        )


def _taken_keys(session: Session, evaluation_id: str) -> set[tuple[int, int]]:
    taken: set[tuple[int, int]] = set()
    for keys_json in session.exec(
        select(EvaluationBatch.keys_json).where(EvaluationBatch.evaluation_id == evaluation_id)
    ):
        taken.update((int(e), int(r)) for e, r in json.loads(keys_json))
    return taken


def append_samples(
    session: Session, store: BlobStorage, evaluation_id: str, principal: Principal,
    raw_samples: Any,
) -> EvaluationBatch:  # fmt: skip
    """Validate one batch, store it as a gzip JSONL blob, and list it on the run.

    A batch identical to one already stored on the run (a client retrying after a lost
    answer) is accepted once: the stored batch is answered and nothing is added.
    """
    if not isinstance(raw_samples, list):
        raise BadRequest('The body must be {"samples": [ {…rollout record…}, … ]}.')
    try:
        records = validate_batch(raw_samples)
    except SampleError as exc:
        raise _refused(exc) from None
    request_sha256 = hashlib.sha256(encode_batch(records)).hexdigest()
    try:
        evaluation = _writable(session, evaluation_id, principal, check_open=False)
        try:
            check_reward_range(records, reward_range(evaluation.environment))
            version = session.get(Version, evaluation.version_id)
            check_rubric(records, declared_rubric(version) if version else None)
        except IntegrityError as exc:
            raise BadRequest(str(exc)) from None
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
        seq = session.exec(
            select(sa.func.count())
            .select_from(EvaluationBatch)
            .where(EvaluationBatch.evaluation_id == evaluation_id)
        ).one()
        if seq >= MAX_BATCHES_PER_RUN:
            raise TooLarge(
                f"This run already holds {seq} batches, the most one run may; push larger "
                "batches (up to 32 MiB each), or finalize it and push the rest as another run."
            )
        try:
            assign_keys(records, _taken_keys(session, evaluation_id))
        except SampleError as exc:
            raise _refused(exc) from None
        blob = encode_batch(records)
        key = batch_key(hashlib.sha256(blob).hexdigest())
        store.put_bytes(blob, key)
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


def sample_count(session: Session, evaluation_id: str) -> int:
    """How many samples the run holds now (after a push: this batch and every earlier one)."""
    evaluation = session.get(Evaluation, evaluation_id)
    return evaluation.sample_count if evaluation is not None else 0


def iter_samples(
    store: BlobStorage, batches: Iterable[EvaluationBatch]
) -> Iterator[dict[str, Any]]:
    """The records of `batches`, in push order."""
    for batch in batches:
        with store.open(batch.blob_key) as handle:
            yield from decode_batch(handle.read())


def finalize_evaluation(
    session: Session,
    store: BlobStorage,
    evaluation_id: str,
    principal: Principal,
    metrics: dict[str, Any] | None,
    settings: HubSettings | None = None,
) -> Evaluation:
    """Close the run: merge the batches' partial sums into the summary; only now can it rank."""
    try:
        evaluation = _writable(session, evaluation_id, principal, check_open=False)
        finished = (EvaluationStatus.COMPLETED, EvaluationStatus.FAILED)
        if evaluation.status in finished and evaluation.client_run_id is not None:
            session.rollback()  # a retried push finalizing its run again: already done
            return evaluation
        _require_open(evaluation)
        summary = _recompute_summary(store, evaluation)
        evaluation.status = (
            EvaluationStatus.COMPLETED if summary.scored else EvaluationStatus.FAILED
        )
        evaluation.finalized_at = utcnow()
        evaluation.summary_json = summary.model_dump_json()
        evaluation.reward_mean = summary.reward_mean
        evaluation.reward_stderr = summary.reward_stderr
        evaluation.n_examples = summary.examples
        evaluation.n_rollouts = summary.scored
        evaluation.n_errors = summary.errors
        if metrics:
            merged = {**stored_json(evaluation.client_metrics_json, {}), **metrics}
            evaluation.client_metrics_json = json.dumps(merged, default=str)
        if settings is not None:
            request_verification(session, settings, evaluation)
        session.add(evaluation)
        session.commit()
    except BaseException:
        session.rollback()
        raise
    return evaluation


def _recompute_summary(store: BlobStorage, evaluation: Evaluation) -> Summary:
    """The run's summary from its batches' partial sums (or their samples); a 409, and nothing
    committed, when the stored samples cannot make one the hub may show (samples stored before
    today's rules, whose sum is not a finite score)."""
    builder = SummaryBuilder()
    try:
        for batch in evaluation.batches:
            if not merge_partial(builder, batch.partial_json):
                add_stored(builder, iter_samples(store, [batch]))
        summary = builder.summary()
    except (ValueError, TypeError, KeyError, OverflowError):
        summary = None
    if summary is None or not is_finite(summary):
        raise Conflict(
            f"Evaluation {evaluation.id} holds samples whose scores the hub cannot sum to a "
            "finite mean (they were pushed before its score rules); it cannot be finalized. "
            "Push the results again as a new evaluation."
        )
    return summary


# -- reads -------------------------------------------------------------------------------


def get_evaluation(
    session: Session, evaluation_id: str, principal: Principal | None
) -> tuple[Evaluation, Environment]:
    evaluation = session.get(Evaluation, evaluation_id)
    if evaluation is None or not can_read_evaluation(principal, evaluation):
        raise _run_not_found(evaluation_id)
    return evaluation, evaluation.environment


def evaluation_on(
    session: Session, principal: Principal | None, owner: str, name: str, evaluation_id: str
) -> tuple[Environment, Evaluation]:
    """A run of `owner/name` (the web pages' URLs name both): 404 for a run of another one."""
    env = find_environment(session, owner, name, principal)
    evaluation, run_env = get_evaluation(session, evaluation_id, principal)
    if run_env.id != env.id:
        raise NotFound(f"Evaluation {evaluation_id} not found on {env.owner.name}/{env.name}.")
    return env, evaluation


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
        .where(readable_evaluations(principal))
    )


@dataclass
class Page:
    items: list[tuple[Evaluation, Environment, Owner]]
    total: int


def listing_environment(
    session: Session, principal: Principal | None, *, env: str | None,
    environment_id: str | None, environment_name: str | None,
) -> tuple[Environment | None, str | None]:  # fmt: skip
    """What a listing filters on: an environment (`env=owner/name`, `environment_id`, or an
    `environment_name` with an owner), or a bare name under any owner."""
    named = _has_owner(environment_name) if environment_name else False
    slug = env or (environment_name if named else None)
    if slug:
        found, spec = environment_by_slug(session, slug, principal)
        if spec is not None:
            raise BadRequest(f"env={slug!r}: a listing takes owner/name, without a version.")
        return found, None
    if environment_id:
        return environment_by_id(session, environment_id, principal), None
    return None, environment_name or None


def _has_owner(reference: str) -> bool:
    """Whether `reference` names its owner (`owner/name`); a malformed one is a 400."""
    try:
        return parse_env_id(reference)[0] is not None
    except ValueError as exc:
        raise BadRequest(str(exc)) from None


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
    return Page(items=[(run, where, owner) for run, where, owner in rows], total=int(total))


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


def other_runs(
    session: Session, principal: Principal | None, evaluation: Evaluation, limit: int
) -> list[tuple[str, str]]:
    """(id, model) of the newest other runs on the same environment the reader may see."""
    rows = session.exec(
        runs_query(principal, Evaluation.id, Evaluation.model_name)
        .where(
            Evaluation.environment_id == evaluation.environment_id,
            Evaluation.id != evaluation.id,
        )
        .order_by(col(Evaluation.created_at).desc())
        .limit(limit)
    ).all()
    return [(run_id, model) for run_id, model in rows]


def read_samples(
    session: Session, store: BlobStorage, evaluation: Evaluation, page: int, per_page: int
) -> list[dict[str, Any]]:
    """One page of samples in push order, decompressing only the batches that hold it."""
    start = (page - 1) * per_page
    stop = start + per_page
    wanted: list[dict[str, Any]] = []
    offset = 0
    for batch in evaluation.batches:
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
    """The summary the hub computed at finalize (None before, or for one it cannot read)."""
    return summary_from_json(evaluation.summary_json)


def pass_at_k(session: Session, evaluation_ids: list[str]) -> dict[str, dict[str, float]]:
    """pass@k of each of these runs, from the summary the hub recomputed at finalize."""
    if not evaluation_ids:
        return {}
    runs = session.exec(select(Evaluation).where(col(Evaluation.id).in_(evaluation_ids))).all()
    shown: dict[str, dict[str, float]] = {}
    for run in runs:
        summary = summary_of(run)
        if summary is not None and summary.pass_at_k:
            shown[run.id] = dict(summary.pass_at_k)
    return shown


def evaluation_info(
    session: Session, evaluation: Evaluation, settings: HubSettings | None = None
) -> EvaluationInfo:
    """A run as the API answers it; given `settings`, a run waiting for verification says
    where it stands in the queue."""
    env = evaluation.environment
    owner_name = env.owner.name
    place = None
    if settings is not None and evaluation.verification == VerificationStatus.PENDING:
        place = queue_position(session, settings, evaluation.id)
    return EvaluationInfo(
        id=evaluation.id,
        evaluation_id=evaluation.id,
        name=evaluation.name,
        environment=EnvironmentLink(
            id=evaluation.environment_id,
            slug=f"{owner_name}/{env.name}",
            owner=owner_name,
            name=env.name,
            version=evaluation.env_version,
            version_id=evaluation.version_id,
        ),
        model_name=evaluation.model_name,
        framework=evaluation.framework,
        status=evaluation.status,
        is_public=evaluation.is_public,
        tags=[tag for tag in stored_json(evaluation.tags_json, []) if isinstance(tag, str)],
        metadata=stored_json(evaluation.metadata_json, {}),
        metrics=stored_json(evaluation.client_metrics_json, {}),
        summary=summary_of(evaluation),
        sample_count=evaluation.sample_count,
        user=evaluation.user.username,
        created_at=evaluation.created_at,
        updated_at=evaluation.updated_at,
        finalized_at=evaluation.finalized_at,
        third_party=is_third_party(session, evaluation),
        hidden=evaluation.hidden_at is not None,
        verification=evaluation.verification,
        verification_detail=place.detail if place else evaluation.verification_detail,
        verification_position=place.position if place else None,
    )


# -- integrity and provenance -------------------------------------------------------------


def reward_range(env: Environment) -> tuple[float, float] | None:
    """The range the environment's owner declared for its rewards, if any."""
    if env.reward_min is None or env.reward_max is None:
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
        return int(cast(CursorResult[Any], result).rowcount)


def set_hidden(
    session: Session, evaluation_id: str, principal: Principal, hidden: bool
) -> Evaluation:
    """The environment's owner hides (or shows again) a run on their leaderboard."""
    evaluation, env = get_evaluation(session, evaluation_id, principal)
    if not principal.can_upload(env.owner, env.normalized_name):
        raise Forbidden(
            "Only the environment's owner (a token that may publish it) can hide or show runs "
            "on its leaderboard."
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


def is_third_party(session: Session, evaluation: Evaluation) -> bool:
    """Python form of `third_party_clause` for one run."""
    owner = evaluation.environment.owner
    if owner.user_id == evaluation.user_id:
        return False
    return session.get(Membership, (owner.id, evaluation.user_id)) is None
