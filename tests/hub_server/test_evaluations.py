"""Evaluation results: sample validation, the hub's summary maths, the service on a real
SQLite database and blob store, and (below) the HTTP API on a real server."""

from __future__ import annotations

import gzip
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session, select

from hub_server.admin import create_org, create_token, create_user, open_database
from hub_server.auth import Principal, authenticate
from hub_server.blobstore import BlobStore
from hub_server.evals import service
from hub_server.evals.leaderboard import leaderboard
from hub_server.evals.models import Evaluation, EvaluationBatch
from hub_server.evals.samples import (
    SampleError,
    assign_keys,
    decode_batch,
    encode_batch,
    validate_batch,
)
from hub_server.evals.schemas import CreateEvaluation
from hub_server.evals.stats import standard_error, summarise
from hub_server.models import Owner, Version
from hub_server.publishing import create_environment
from hub_server.settings import HubSettings


def rollout(example: int, rollout_index: int | None = 0, reward: float | None = 1.0, **extra: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "example_index": example,
        "reward": reward,
        "prompt": [{"role": "user", "content": f"q{example}"}],
        "completion": [{"role": "assistant", "content": f"a{example}"}],
        "error": None,
        **extra,
    }
    if rollout_index is not None:
        record["rollout_index"] = rollout_index
    return record


def failed(example: int, rollout_index: int) -> dict[str, Any]:
    return rollout(example, rollout_index, reward=None, error={"type": "RateLimitError", "message": "429 after 5 retries"})


# -- pure: validation, blob format, maths ------------------------------------------------


def test_batch_round_trips_through_gzip_jsonl_byte_for_byte() -> None:
    records = validate_batch([rollout(0, 0, 0.5, info={"ünï": "côdé"}), rollout(1, 0, 1.0)])
    blob = encode_batch(records)
    assert blob == encode_batch(records)  # reproducible: equal batches share a blob
    assert gzip.decompress(blob).count(b"\n") == 2
    assert list(decode_batch(blob)) == records


@pytest.mark.parametrize(
    ("samples", "message"),
    [
        ([], "samples is empty"),
        (["nope"], "samples[0] is not a JSON object"),
        ([{"reward": 1.0}], "samples[0].example_index: Field required"),
        ([rollout(-1)], "samples[0].example_index"),
        ([rollout(0, reward=None)], "has neither a reward nor an error"),
        ([rollout(0, reward="high")], "samples[0].reward"),
        ([{**rollout(0), "reward": float("nan")}], "finite"),
        ([rollout(0, error={"message": "no type"})], "samples[0].error.type"),
    ],
)
def test_malformed_samples_are_refused_with_the_position(samples: list[Any], message: str) -> None:
    with pytest.raises(SampleError) as caught:
        validate_batch(samples)
    assert message in str(caught.value)
    assert caught.value.status == 400


def test_too_many_samples_is_413() -> None:
    with pytest.raises(SampleError) as caught:
        validate_batch([rollout(i) for i in range(10_001)])
    assert caught.value.status == 413


def test_an_errored_rollout_never_keeps_a_reward() -> None:
    (record,) = validate_batch([rollout(0, 0, reward=0.0, error="provider timed out")])
    assert record["reward"] is None
    assert record["error"] == {"type": "Error", "message": "provider timed out"}


def test_verifiers_rows_are_numbered_per_example_and_repeats_are_409() -> None:
    taken: set[tuple[int, int]] = {(0, 0)}
    records = validate_batch([{"example_id": 0, "reward": 1.0}, {"example_id": 0, "reward": 0.0}, {"example_id": 3, "reward": 1.0}])
    assign_keys(records, taken)
    assert [(r["example_index"], r["rollout_index"]) for r in records] == [(0, 1), (0, 2), (3, 0)]
    with pytest.raises(SampleError) as caught:
        assign_keys(validate_batch([rollout(3, 0)]), taken)
    assert caught.value.status == 409


def test_summary_excludes_errors_and_takes_stderr_over_examples() -> None:
    records = validate_batch(
        [
            rollout(0, 0, 1.0, metrics={"turns": 2}),
            rollout(0, 1, 0.0, metrics={"turns": 4}),
            rollout(1, 0, 1.0, metrics={"turns": 3}),
            rollout(1, 1, 1.0, metrics={"turns": 3}),
            failed(2, 0),
            failed(2, 1),
        ]
    )
    summary = summarise(records)
    assert summary.mean_reward == pytest.approx(0.75)  # 3 of 4 scored rollouts; errors not 0
    assert summary.n_rollouts == 4 and summary.n_errors == 2 and summary.n_examples == 2
    assert summary.errors_by_type == {"RateLimitError": 2}
    # example means 0.5 and 1.0 -> sd 0.35355, / sqrt(2)
    assert summary.stderr == pytest.approx(math.sqrt(0.125) / math.sqrt(2))
    assert summary.metrics == {"turns": 3.0}


def test_standard_error_needs_two_values() -> None:
    assert standard_error([0.3]) is None
    assert standard_error([0.0, 1.0]) == pytest.approx(0.5)


# -- service on a real database and blob store --------------------------------------------


class Hub:
    """A hub's database and blob store with two users, an org and a few environments."""

    def __init__(self, root: Path) -> None:
        settings = HubSettings(data_dir=root)
        self.engine = open_database(settings)
        self.store = BlobStore(settings.resolved_storage_url)
        for name in ("alice", "bob"):
            create_user(self.engine, name)
        create_org(self.engine, "acme", ["alice"])
        self.tokens = {
            "alice": create_token(self.engine, "alice", "t")[0],
            "bob": create_token(self.engine, "bob", "t")[0],
            "bob-read": create_token(self.engine, "bob", "r", ["read"])[0],
        }
        with Session(self.engine, expire_on_commit=False) as session:
            for owner_name, env_name, visibility, versions in (
                ("alice", "wordle", "public", [("0.1.0", False), ("0.2.0", False), ("0.3.0rc1", False), ("0.2.1", True)]),
                ("acme", "secret", "private", [("1.0.0", False)]),
                ("alice", "empty", "public", []),
            ):
                owner = session.exec(select(Owner).where(Owner.name == owner_name)).one()
                env = create_environment(session, owner, env_name, visibility=visibility)
                for number, yanked in versions:
                    session.add(Version(environment_id=env.id, version=number, canonical_version=number, yanked=yanked))
            session.commit()

    def principal(self, who: str | None) -> Principal | None:
        if who is None:
            return None
        with Session(self.engine, expire_on_commit=False) as session:
            return authenticate(session, self.tokens[who])

    def session(self) -> Session:
        return Session(self.engine, expire_on_commit=False)


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[Hub]:
    hub = Hub(tmp_path)
    yield hub
    hub.engine.dispose()


def create(hub: Hub, who: str, slug: str, version: str | None = None, **fields: Any) -> Evaluation:
    principal = hub.principal(who)
    assert principal is not None
    body = {"name": "run", "environments": [{"slug": slug, "version": version}], "model_name": "m", **fields}
    with hub.session() as session:
        return service.create_evaluation(session, CreateEvaluation.model_validate(body), principal)


def push(hub: Hub, who: str, evaluation_id: str, samples: list[Any]) -> EvaluationBatch:
    principal = hub.principal(who)
    assert principal is not None
    with hub.session() as session:
        return service.append_samples(session, hub.store, evaluation_id, principal, samples)


def finalize(hub: Hub, who: str, evaluation_id: str) -> Evaluation:
    principal = hub.principal(who)
    assert principal is not None
    with hub.session() as session:
        return service.finalize_evaluation(session, hub.store, evaluation_id, principal, {"avg_reward": 0.5})


def test_latest_resolves_to_newest_final_unyanked_version(hub: Hub) -> None:
    assert create(hub, "alice", "alice/wordle").env_version == "0.2.0"
    assert create(hub, "alice", "alice/wordle@0.1.0").env_version == "0.1.0"
    assert create(hub, "alice", "alice/Wordle", "0.3.0rc1").env_version == "0.3.0rc1"


@pytest.mark.parametrize(
    ("who", "slug", "version", "status", "message"),
    [
        ("alice", "alice/nope", None, 404, "Environment alice/nope not found"),
        ("alice", "alice/wordle", "9.9", 404, "no version '9.9'; known versions: 0.1.0, 0.2.0, 0.2.1, 0.3.0rc1"),
        ("alice", "alice/empty", None, 404, "no published version yet"),
        ("bob", "acme/secret", None, 404, "Environment acme/secret not found"),
        ("alice", "wordle", None, 400, "not of the form owner/name"),
        ("bob-read", "alice/wordle", None, 403, "may not push results"),
    ],
)
def test_create_refuses_bad_references(hub: Hub, who: str, slug: str, version: str | None, status: int, message: str) -> None:
    with pytest.raises(service.EvalError) as caught:
        create(hub, who, slug, version)
    assert caught.value.status == status
    assert message in caught.value.message
    with hub.session() as session:
        assert session.exec(select(Evaluation)).all() == []


def test_push_finalize_and_leaderboard(hub: Hub) -> None:
    run = create(hub, "alice", "alice/wordle", is_public=True)
    push(hub, "alice", run.id, [rollout(0, 0, 1.0), rollout(0, 1, 0.0), failed(1, 0)])
    push(hub, "alice", run.id, [rollout(1, 1, 1.0), rollout(2, 0, 1.0)])
    done = finalize(hub, "alice", run.id)
    assert done.status == "completed"
    assert done.sample_count == 5 and done.n_rollouts == 4 and done.n_errors == 1 and done.n_examples == 3
    assert done.mean_reward == pytest.approx(0.75)
    with hub.session() as session:
        batches = session.exec(select(EvaluationBatch).where(EvaluationBatch.evaluation_id == run.id)).all()
        assert [b.sample_count for b in sorted(batches, key=lambda b: b.seq)] == [3, 2]
        assert all(b.blob_key.startswith("evals/sha256/") for b in batches)
        page = service.read_samples(session, hub.store, done, page=2, per_page=2)
        assert [(s["example_index"], s["rollout_index"]) for s in page] == [(1, 0), (1, 1)]
        env = service.find_environment(session, "alice", "wordle", None)
        rows = leaderboard(session, env, None)
    assert [(r.model, r.rank, r.rollouts, r.errors, r.env_version) for r in rows] == [("m", 1, 4, 1, "0.2.0")]


def test_best_run_per_model_and_only_finalized_public_runs_rank(hub: Hub) -> None:
    def run(model: str, rewards: list[float], *, public: bool = True, final: bool = True, who: str = "alice") -> str:
        evaluation = create(hub, who, "alice/wordle", model_name=model, is_public=public)
        push(hub, who, evaluation.id, [rollout(i, 0, r) for i, r in enumerate(rewards)])
        if final:
            finalize(hub, who, evaluation.id)
        return evaluation.id

    run("small", [0.0, 1.0])
    best_small = run("small", [1.0, 1.0, 0.0, 1.0])
    run("small", [1.0, 1.0], final=False)  # open: never ranks
    big = run("big", [1.0, 1.0, 1.0])
    run("hidden", [1.0], public=False, who="bob")  # private run: only bob sees it
    with hub.session() as session:
        env = service.find_environment(session, "alice", "wordle", None)
        anonymous = leaderboard(session, env, None)
        as_bob = leaderboard(session, env, hub.principal("bob"))
    assert [(r.model, r.evaluation_id) for r in anonymous] == [("big", big), ("small", best_small)]
    assert [r.model for r in as_bob] == ["big", "hidden", "small"]


def test_finalize_twice_and_push_after_finalize_are_409_and_change_nothing(hub: Hub) -> None:
    run = create(hub, "alice", "alice/wordle")
    push(hub, "alice", run.id, [rollout(0)])
    first = finalize(hub, "alice", run.id)
    for attempt in (lambda: finalize(hub, "alice", run.id), lambda: push(hub, "alice", run.id, [rollout(1)])):
        with pytest.raises(service.EvalError) as caught:
            attempt()
        assert caught.value.status == 409 and "already finalized" in caught.value.message
    with hub.session() as session:
        again = session.get(Evaluation, run.id)
        assert again is not None and again.finalized_at == first.finalized_at and again.sample_count == 1
        assert len(session.exec(select(EvaluationBatch)).all()) == 1


def test_duplicate_rollout_is_409_and_leaves_no_batch(hub: Hub) -> None:
    run = create(hub, "alice", "alice/wordle")
    push(hub, "alice", run.id, [rollout(0, 0)])
    blobs_before = sorted(p for p in Path(hub.store.root).rglob("*") if p.is_file())
    with pytest.raises(service.EvalError) as caught:
        push(hub, "alice", run.id, [rollout(1, 0), rollout(0, 0)])
    assert caught.value.status == 409
    with hub.session() as session:
        assert session.get(Evaluation, run.id).sample_count == 1  # type: ignore[union-attr]
        assert len(session.exec(select(EvaluationBatch)).all()) == 1
    assert sorted(p for p in Path(hub.store.root).rglob("*") if p.is_file()) == blobs_before


def test_other_users_cannot_write_or_see_private_runs(hub: Hub) -> None:
    run = create(hub, "alice", "alice/wordle", is_public=False)
    with pytest.raises(service.EvalError) as caught:
        push(hub, "bob", run.id, [rollout(0)])
    assert caught.value.status == 404  # bob cannot see a private run: it does not exist for him
    public = create(hub, "alice", "alice/wordle", is_public=True)
    with pytest.raises(service.EvalError) as caught:
        push(hub, "bob", public.id, [rollout(0)])
    assert caught.value.status == 403
    with hub.session() as session:
        with pytest.raises(service.EvalError):
            service.get_evaluation(session, run.id, hub.principal("bob"))
        assert service.get_evaluation(session, run.id, hub.principal("alice"))[0].id == run.id


def test_runs_on_a_private_environment_are_invisible_to_outsiders(hub: Hub) -> None:
    run = create(hub, "alice", "acme/secret", is_public=True)
    push(hub, "alice", run.id, [rollout(0)])
    finalize(hub, "alice", run.id)
    with hub.session() as session:
        for outsider in (None, hub.principal("bob")):
            page = service.list_evaluations(session, outsider, env=None, model=None, status=None, page=1, per_page=20)
            assert page.total == 0
            with pytest.raises(service.EvalError) as caught:
                service.get_evaluation(session, run.id, outsider)
            assert caught.value.status == 404
        mine = service.list_evaluations(session, hub.principal("alice"), env=None, model=None, status=None, page=1, per_page=20)
        assert [e.id for e, _env, _owner in mine.items] == [run.id]
