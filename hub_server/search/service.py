"""Listing and searching environments in SQL: visibility, full-text search, tags, sort, paging.

The REST listing and the web pages share this one query, so both show the same environments in
the same order and neither loads more rows than one page. Text search uses the database's own
full-text index: SQLite's FTS5 table `environment_fts` (kept in step by triggers, see migration
`web_0001`) or PostgreSQL's `to_tsvector('simple', …)` over an expression GIN index. Each word
of the query must match (a prefix of) a word of the name or description, or be the owner's name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from sqlalchemy import ColumnElement, bindparam, column, func, literal_column, or_, text
from sqlmodel import Session, col, select

from hub_server.accounts.auth import Principal
from hub_server.accounts.models import Owner
from hub_server.evals.models import Evaluation, EvaluationStatus
from hub_server.registry.access import readable_environments
from hub_server.registry.models import Environment, EnvironmentTag

SortField = Literal["updated_at", "created_at", "name", "downloads", "evaluations", "relevance"]
SORT_FIELDS: tuple[str, ...] = (
    "updated_at",
    "created_at",
    "name",
    "downloads",
    "evaluations",
    "relevance",
)
_WORD = re.compile(r"\w+", re.UNICODE)
MAX_WORDS = 8


def query_words(query: str) -> list[str]:
    """The words of a search, lowercased; punctuation never reaches the full-text syntax."""
    return [w.lower() for w in _WORD.findall(query)][:MAX_WORDS]


@dataclass(frozen=True)
class EnvironmentQuery:
    """What a listing asks for; every field has the "show everything" default."""

    text: str = ""
    tags: tuple[str, ...] = ()
    owner: str | None = None
    visibility: str | None = None
    mine: bool = False
    sort: SortField = "updated_at"
    order: Literal["asc", "desc"] | None = None
    page: int = 1
    per_page: int = 20
    exclude_owner_ids: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class SearchResult:
    rows: list[tuple[Environment, Owner]]
    total: int


_PG_DOCUMENT: ColumnElement[Any] = literal_column(
    # Written out exactly as migration web_0001's index expression, so the index is used.
    "to_tsvector('simple', coalesce(environment.name, '') || ' ' || "
    "coalesce(environment.description, ''))"
)


def _word_condition(dialect: str, word: str) -> ColumnElement[bool]:
    """`word` is a prefix of a word of the name or description, or is the owner's name."""
    owner_match = col(Owner.name) == word
    if dialect == "sqlite":
        hits = text(
            "SELECT rowid FROM environment_fts WHERE environment_fts MATCH :fts_word"
        ).bindparams(bindparam("fts_word", f'"{word}"*', unique=True))
        return or_(
            literal_column("environment.rowid").in_(hits.columns(column("rowid"))), owner_match
        )
    if dialect == "postgresql":
        tsquery = func.to_tsquery("simple", f"{word}:*")
        return or_(_PG_DOCUMENT.op("@@")(tsquery), owner_match)
    pattern = f"%{word}%"
    return or_(
        func.lower(Environment.name).like(pattern),
        func.lower(Environment.description).like(pattern),
        owner_match,
    )


def _relevance(dialect: str, statement: Any, words: list[str]) -> tuple[Any, Any]:
    """(statement, key): a smaller key is a better text match (owner-only matches rank last)."""
    if dialect == "sqlite":
        match = " OR ".join(f'"{w}"*' for w in words)
        ranks = (
            text(
                "SELECT rowid AS fts_rowid, bm25(environment_fts) AS fts_rank "
                "FROM environment_fts WHERE environment_fts MATCH :fts_any"
            )
            .bindparams(fts_any=match)
            .columns(column("fts_rowid"), column("fts_rank"))
            .cte("fts")
            .prefix_with("MATERIALIZED")
        )
        # Ranks computed once (MATERIALIZED) and looked up per row: SQLite indexes them for
        # this correlated lookup, but scans them once per environment row for a LEFT JOIN
        # (bound MATCH parameters hide their size from the planner).
        rank = (
            select(ranks.c.fts_rank)
            .where(ranks.c.fts_rowid == literal_column("environment.rowid"))
            .scalar_subquery()
        )
        return statement, func.coalesce(rank, 0.0)
    if dialect == "postgresql":
        tsquery = func.to_tsquery("simple", " | ".join(f"{w}:*" for w in words))
        return statement, -func.ts_rank(_PG_DOCUMENT, tsquery)
    return statement, col(Environment.normalized_name)


def search_environments(
    session: Session, principal: Principal | None, query: EnvironmentQuery
) -> SearchResult:
    """One page of the environments `principal` may see that match `query`, and their total."""
    statement = select(Environment, Owner).join(Owner, col(Owner.id) == col(Environment.owner_id))
    statement = statement.where(readable_environments(principal))
    words = query_words(query.text)
    dialect = session.get_bind().dialect.name
    for word in words:
        statement = statement.where(_word_condition(dialect, word))
    for wanted in query.tags:
        statement = statement.where(
            col(Environment.id).in_(
                select(EnvironmentTag.environment_id).where(EnvironmentTag.tag == wanted)
            )
        )
    if query.owner:
        statement = statement.where(Owner.name == query.owner.lower())
    if query.visibility:
        statement = statement.where(Environment.visibility == query.visibility.lower())
    if query.mine:
        owner_ids = principal.owner_ids if principal else set()
        statement = statement.where(col(Environment.owner_id).in_(owner_ids))
    if query.exclude_owner_ids:
        statement = statement.where(col(Environment.owner_id).not_in(query.exclude_owner_ids))
    total = session.exec(select(func.count()).select_from(statement.subquery())).one()
    direction = query.order or ("asc" if query.sort in ("name", "relevance") else "desc")
    key: Any
    if query.sort == "relevance" and words:
        statement, key = _relevance(dialect, statement, words)
    elif query.sort == "relevance":
        key, direction = col(Environment.updated_at), query.order or "desc"
    elif query.sort == "evaluations":
        key = (
            select(func.count())
            .select_from(Evaluation)
            .where(
                Evaluation.environment_id == Environment.id,
                Evaluation.status == EvaluationStatus.COMPLETED,
            )
            .correlate(Environment)
            .scalar_subquery()
        )
    else:
        key = {
            "name": col(Environment.normalized_name),
            "created_at": col(Environment.created_at),
            "updated_at": col(Environment.updated_at),
            "downloads": col(Environment.downloads),
        }[query.sort]
    ordered = key.asc() if direction == "asc" else key.desc()
    rows = session.exec(
        statement.order_by(ordered, col(Environment.normalized_name), col(Environment.id))
        .offset((query.page - 1) * query.per_page)
        .limit(query.per_page)
    ).all()
    return SearchResult(rows=[(env, owner) for env, owner in rows], total=total)
