"""A row per pushed sample (reward, error type, stop reason, keys), so the samples viewer
filters and pages in SQL and opens only the batches that hold the page it shows.

Samples themselves stay in their gzip JSONL batch blobs; this index holds a few scalars per
sample. A batch is indexed the first time a run's samples are viewed (and whenever a new batch
has arrived since), so runs pushed before this table existed are indexed on first view too.
Two viewers indexing the same batch at once is harmless: the primary key makes the second
insert fail, and it simply reads what the first one wrote.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, func, select

from hub_server.core.blobstore import BlobStorage
from hub_server.core.cache import LruCache
from hub_server.evals.integrity import MAX_ABS_SCORE, finite_score, index_problem
from hub_server.evals.models import Evaluation, EvaluationBatch, EvaluationSample
from hub_server.evals.samples import batch_lines, decode_batch, decode_record

HISTOGRAM_BINS = 10


def _unindexed(session: Session, evaluation_id: str) -> list[EvaluationBatch]:
    # NOT EXISTS probes the primary key once per batch; `seq NOT IN (all indexed seqs)` read
    # every sample row of the run on every view (100,000 for a large run).
    indexed = sa.exists().where(
        col(EvaluationSample.evaluation_id) == evaluation_id,
        col(EvaluationSample.seq) == col(EvaluationBatch.seq),
    )
    return list(
        session.exec(
            select(EvaluationBatch)
            .where(EvaluationBatch.evaluation_id == evaluation_id, ~indexed)
            .order_by(col(EvaluationBatch.seq))
        )
    )


def _text(value: Any, limit: int) -> str | None:
    return str(value)[:limit] if value not in (None, "") else None


def _index(value: Any) -> int:
    """A stored index, or -1 where it is not one the hub accepts today (a legacy sample)."""
    return value if index_problem(value) is None else -1


def _rows(
    evaluation_id: str, batch: EvaluationBatch, records: Iterator[dict[str, Any]]
) -> list[dict[str, Any]]:
    rows = []
    for position, record in enumerate(records):
        error = record.get("error")
        error_type = error.get("type") if isinstance(error, dict) else (error or None)
        rows.append(
            {
                "evaluation_id": evaluation_id,
                "seq": batch.seq,
                "position": position,
                "example_index": _index(record.get("example_index")),
                "rollout_index": _index(record.get("rollout_index") or 0),
                "reward": finite_score(record.get("reward")) if error is None else None,
                "error_type": _text(error_type, 128),
                "stop_reason": _text(record.get("stop_reason"), 64),
            }
        )
    return rows


def ensure_indexed(session: Session, store: BlobStorage, evaluation: Evaluation) -> None:
    """Index every batch of `evaluation` that has no rows yet (reads only those blobs)."""
    for batch in _unindexed(session, evaluation.id):
        with store.open(batch.blob_key) as handle:
            rows = _rows(evaluation.id, batch, decode_batch(handle.read()))
        if not rows:
            continue
        try:
            session.execute(sa.insert(EvaluationSample), rows)
            session.commit()
        except IntegrityError:
            session.rollback()  # another viewer indexed this batch first


@dataclass(frozen=True)
class SampleFilter:
    reward_min: float | None = None
    reward_max: float | None = None
    error_type: str | None = None  # a type, or "any" for every errored sample
    stop_reason: str | None = None
    example_index: int | None = None


def _filtered(evaluation_id: str, wanted: SampleFilter) -> Any:
    query = select(EvaluationSample).where(EvaluationSample.evaluation_id == evaluation_id)
    if wanted.reward_min is not None:
        query = query.where(col(EvaluationSample.reward) >= wanted.reward_min)
    if wanted.reward_max is not None:
        query = query.where(col(EvaluationSample.reward) <= wanted.reward_max)
    if wanted.error_type == "any":
        query = query.where(col(EvaluationSample.error_type).is_not(None))
    elif wanted.error_type:
        query = query.where(EvaluationSample.error_type == wanted.error_type)
    if wanted.stop_reason:
        query = query.where(EvaluationSample.stop_reason == wanted.stop_reason)
    if wanted.example_index is not None:
        query = query.where(EvaluationSample.example_index == wanted.example_index)
    return query


@dataclass(frozen=True)
class SamplePage:
    samples: list[dict[str, Any]]
    total: int


def page_of_samples(
    session: Session,
    store: BlobStorage,
    evaluation: Evaluation,
    wanted: SampleFilter,
    page: int,
    per_page: int,
) -> SamplePage:
    """One page of the samples that match `wanted`, in push order."""
    ensure_indexed(session, store, evaluation)
    query = _filtered(evaluation.id, wanted)
    total = session.exec(select(func.count()).select_from(query.subquery())).one()
    rows = session.exec(
        query.order_by(col(EvaluationSample.seq), col(EvaluationSample.position))
        .offset((page - 1) * per_page)
        .limit(per_page)
    ).all()
    wanted_positions: dict[int, set[int]] = {}
    for row in rows:
        wanted_positions.setdefault(row.seq, set()).add(row.position)
    blobs = dict(
        session.exec(
            select(EvaluationBatch.seq, EvaluationBatch.blob_key).where(
                EvaluationBatch.evaluation_id == evaluation.id,
                col(EvaluationBatch.seq).in_(list(wanted_positions)),
            )
        ).all()
    )
    found: dict[tuple[int, int], dict[str, Any]] = {}
    for seq, positions in wanted_positions.items():
        with store.open(blobs[seq]) as handle:
            for position, line in enumerate(batch_lines(handle.read())):
                if position in positions:
                    found[(seq, position)] = decode_record(line)
    return SamplePage([found[(row.seq, row.position)] for row in rows], total)


@dataclass(frozen=True)
class Bar:
    low: float
    high: float
    count: int


@dataclass(frozen=True)
class Overview:
    """What the run page shows above its samples: the reward histogram and the filters' facets."""

    bars: list[Bar]
    facets: dict[str, list[tuple[str, int]]]


# Both scan every sample row of the run (100,000 for a large run: most of a page view), and
# they change only when samples arrive, so they are kept per (run, sample count).
_OVERVIEWS: LruCache[Overview] = LruCache(capacity=256)


def run_overview(session: Session, evaluation: Evaluation) -> Overview:
    """The run's histogram and facets (call after `ensure_indexed`, as `page_of_samples` does:
    the index then holds at least `sample_count` samples, so a cached entry is never older
    than its key)."""
    key = (evaluation.id, evaluation.sample_count)
    overview = _OVERVIEWS.get(key)
    if overview is None:
        overview = Overview(
            reward_histogram(session, evaluation.id), facets(session, evaluation.id)
        )
        _OVERVIEWS.put(key, overview)
    return overview


def reward_histogram(session: Session, evaluation_id: str, bins: int = HISTOGRAM_BINS) -> list[Bar]:
    """Scored samples per reward bin between the run's lowest and highest reward (SQL)."""
    scored = col(EvaluationSample.reward).between(-MAX_ABS_SCORE, MAX_ABS_SCORE)
    where = (EvaluationSample.evaluation_id == evaluation_id, scored)
    low, high = session.exec(
        select(func.min(EvaluationSample.reward), func.max(EvaluationSample.reward)).where(*where)
    ).one()
    if low is None or high is None:
        return []
    if high == low:
        count = session.exec(select(func.count()).where(*where)).one()
        return [Bar(low, high, count)]
    width = (high - low) / bins
    # Values are >= low, so CAST truncation is floor; the maximum goes in the last bin.
    index = sa.cast((col(EvaluationSample.reward) - low) / width, sa.Integer)
    bucket = sa.case((index >= bins, bins - 1), else_=index)
    counts = dict(session.exec(select(bucket, func.count()).where(*where).group_by(bucket)).all())
    return [Bar(low + i * width, low + (i + 1) * width, counts.get(i, 0)) for i in range(bins)]


def facets(session: Session, evaluation_id: str) -> dict[str, list[tuple[str, int]]]:
    """The error types and stop reasons present, with counts (for the viewer's filters)."""
    result: dict[str, list[tuple[str, int]]] = {}
    for name, column in (
        ("error_type", EvaluationSample.error_type),
        ("stop_reason", EvaluationSample.stop_reason),
    ):
        rows = session.exec(
            select(column, func.count())
            .where(EvaluationSample.evaluation_id == evaluation_id, col(column).is_not(None))
            .group_by(column)
            .order_by(func.count().desc())
        ).all()
        result[name] = [(str(value), count) for value, count in rows]
    return result


def example_means(
    session: Session, evaluation_id: str, examples: list[int]
) -> dict[int, tuple[float | None, int, int]]:
    """Per example of `examples`: (mean reward of scored samples, scored count, errors)."""
    rows = session.exec(
        select(
            EvaluationSample.example_index,
            func.avg(EvaluationSample.reward),
            func.count(col(EvaluationSample.reward)),
            func.count(col(EvaluationSample.error_type)),
        )
        .where(
            EvaluationSample.evaluation_id == evaluation_id,
            col(EvaluationSample.example_index).in_(examples),
        )
        .group_by(col(EvaluationSample.example_index))
    ).all()
    return {
        int(index): (finite_score(mean), int(scored), int(errors))
        for index, mean, scored, errors in rows
    }


def example_indexes(
    session: Session, evaluation_ids: list[str], page: int, per_page: int
) -> tuple[list[int], int]:
    """One page of the distinct example indexes of the given runs, and how many there are."""
    query = (
        select(EvaluationSample.example_index)
        .where(col(EvaluationSample.evaluation_id).in_(evaluation_ids))
        .distinct()
    )
    total = session.exec(select(func.count()).select_from(query.subquery())).one()
    rows = session.exec(
        query.order_by(col(EvaluationSample.example_index))
        .offset((page - 1) * per_page)
        .limit(per_page)
    ).all()
    return [int(index) for index in rows], int(total)
