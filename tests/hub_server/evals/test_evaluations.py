"""Evaluation results: sample validation, the service on a real SQLite database and blob
store, and the HTTP API on the hub in-process (PostgreSQL and S3 real servers where they are
the point; a real `prime hub serve` only for the stock `prime-evals` SDK, which opens its own
connections).

The running-hub helpers here (`RunningHub`, `build_wheel`) are shared with web/test_pages.py.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session, select

from hub_server.accounts.auth import Principal, authenticate
from hub_server.accounts.models import Owner
from hub_server.admin import create_org, create_token, create_user, open_database
from hub_server.core.blobstore import BlobStore
from hub_server.core.errors import HubError
from hub_server.core.settings import HubSettings
from hub_server.evals import service
from hub_server.evals.leaderboard import leaderboard
from hub_server.evals.models import Evaluation, EvaluationBatch
from hub_server.evals.samples import (
    MAX_SAMPLES_PER_BATCH,
    SampleError,
    assign_keys,
    decode_batch,
    encode_batch,
    validate_batch,
)
from hub_server.registry.models import Version
from hub_server.registry.publishing import create_environment
from registry_index.schemas.evals import CreateEvaluation
from tests.hub_server.hubproc import HubAccounts, start_hub
from tests.hub_server.inproc import start_inproc_hub
from tests.hub_server.wheels import twine_upload_form


def rollout(
    example: int, rollout_index: int | None = 0, reward: float | None = 1.0, **extra: Any
) -> dict[str, Any]:
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
    return rollout(
        example,
        rollout_index,
        reward=None,
        error={"type": "RateLimitError", "message": "429 after 5 retries"},
    )


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
        validate_batch([rollout(i) for i in range(MAX_SAMPLES_PER_BATCH + 1)])
    assert caught.value.status == 413


def test_an_errored_rollout_never_keeps_a_reward() -> None:
    (record,) = validate_batch([rollout(0, 0, reward=0.0, error="provider timed out")])
    assert record["reward"] is None
    assert record["error"] == {"type": "Error", "message": "provider timed out"}


def test_verifiers_rows_are_numbered_per_example_and_repeats_are_409() -> None:
    taken: set[tuple[int, int]] = {(0, 0)}
    records = validate_batch(
        [
            {"example_id": 0, "reward": 1.0},
            {"example_id": 0, "reward": 0.0},
            {"example_id": 3, "reward": 1.0},
        ]
    )
    assign_keys(records, taken)
    assert [(r["example_index"], r["rollout_index"]) for r in records] == [(0, 1), (0, 2), (3, 0)]
    with pytest.raises(SampleError) as caught:
        assign_keys(validate_batch([rollout(3, 0)]), taken)
    assert caught.value.status == 409


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
                (
                    "alice",
                    "wordle",
                    "public",
                    [("0.1.0", False), ("0.2.0", False), ("0.3.0rc1", False), ("0.2.1", True)],
                ),
                ("acme", "secret", "private", [("1.0.0", False)]),
                ("alice", "empty", "public", []),
            ):
                owner = session.exec(select(Owner).where(Owner.name == owner_name)).one()
                env = create_environment(session, owner, env_name, visibility=visibility)
                for number, yanked in versions:
                    session.add(
                        Version(
                            environment_id=env.id,
                            version=number,
                            canonical_version=number,
                            yanked=yanked,
                        )
                    )
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
    body = {
        "name": "run",
        "environments": [{"slug": slug, "version": version}],
        "model_name": "m",
        **fields,
    }
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
        return service.finalize_evaluation(
            session, hub.store, evaluation_id, principal, {"avg_reward": 0.5}
        )


def test_latest_resolves_to_newest_final_unyanked_version(hub: Hub) -> None:
    assert create(hub, "alice", "alice/wordle").env_version == "0.2.0"
    assert create(hub, "alice", "alice/wordle@0.1.0").env_version == "0.1.0"
    assert create(hub, "alice", "alice/Wordle", "0.3.0rc1").env_version == "0.3.0rc1"


def test_a_version_specifier_selects_as_install_does(hub: Hub) -> None:
    """`@spec` takes the forms `prime env install` takes: yanked 0.2.1 only by an exact pin,
    the pre-release only when asked for."""
    assert create(hub, "alice", "alice/wordle@>=0.2").env_version == "0.2.0"
    assert create(hub, "alice", "alice/wordle", ">=0.1,<0.2").env_version == "0.1.0"
    assert create(hub, "alice", "alice/wordle@==0.2.1").env_version == "0.2.1"
    with pytest.raises(HubError) as caught:
        create(hub, "alice", "alice/wordle@>=1")
    assert caught.value.status == 404 and "no version '>=1'" in caught.value.message
    with pytest.raises(HubError) as caught:
        create(hub, "alice", "alice/wordle@not a spec")
    assert caught.value.status == 400


@pytest.mark.parametrize(
    ("who", "slug", "version", "status", "message"),
    [
        ("alice", "alice/nope", None, 404, "Environment alice/nope not found"),
        (
            "alice",
            "alice/wordle",
            "9.9",
            404,
            "no version '9.9'; known versions: 0.1.0, 0.2.0, 0.2.1, 0.3.0rc1",
        ),
        ("alice", "alice/empty", None, 404, "no published version yet"),
        ("bob", "acme/secret", None, 404, "Environment acme/secret not found"),
        ("alice", "wordle", None, 400, "not of the form owner/name"),
        ("bob-read", "alice/wordle", None, 403, "may not push results"),
    ],
)
def test_create_refuses_bad_references(
    hub: Hub, who: str, slug: str, version: str | None, status: int, message: str
) -> None:
    with pytest.raises(HubError) as caught:
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
    assert (
        done.sample_count == 5
        and done.n_rollouts == 4
        and done.n_errors == 1
        and done.n_examples == 3
    )
    assert done.reward_mean == pytest.approx(0.75)
    with hub.session() as session:
        batches = session.exec(
            select(EvaluationBatch).where(EvaluationBatch.evaluation_id == run.id)
        ).all()
        assert [b.sample_count for b in sorted(batches, key=lambda b: b.seq)] == [3, 2]
        assert all(b.blob_key.startswith("evals/sha256/") for b in batches)
        page = service.read_samples(session, hub.store, done, page=2, per_page=2)
        assert [(s["example_index"], s["rollout_index"]) for s in page] == [(1, 0), (1, 1)]
        env = service.find_environment(session, "alice", "wordle", None)
        rows = leaderboard(session, env, None)
    assert [(r.model, r.rank, r.rollouts, r.errors, r.env_version) for r in rows] == [
        ("m", 1, 4, 1, "0.2.0")
    ]


def test_best_run_per_model_and_only_finalized_public_runs_rank(hub: Hub) -> None:
    def run(
        model: str,
        rewards: list[float],
        *,
        public: bool = True,
        final: bool = True,
        who: str = "alice",
    ) -> str:
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
    # Ranked by the interval's lower end: bob's 1-example run at 1.0 comes after the
    # 4-example one at 0.75 (docs/eval.md, "Reading a leaderboard").
    assert [r.model for r in as_bob] == ["big", "small", "hidden"]


def test_a_run_of_errors_only_is_failed_and_never_ranks(hub: Hub) -> None:
    """A client that pushes a run whose every rollout failed (the stock client does) gets it
    finalized as `failed`: nothing was scored, so it never reaches the leaderboard."""
    broken = create(hub, "alice", "alice/wordle", model_name="down", is_public=True)
    push(hub, "alice", broken.id, [failed(0, 0), failed(1, 0)])
    assert finalize(hub, "alice", broken.id).status == "failed"
    fine = create(hub, "alice", "alice/wordle", model_name="up", is_public=True)
    push(hub, "alice", fine.id, [rollout(0, 0, 1.0), failed(1, 0)])
    assert finalize(hub, "alice", fine.id).status == "completed"
    with hub.session() as session:
        env = service.find_environment(session, "alice", "wordle", None)
        assert [r.model for r in leaderboard(session, env, None)] == ["up"]


def test_the_board_names_the_served_model_beside_the_alias(hub: Hub) -> None:
    served = create(
        hub, "alice", "alice/wordle", model_name="my-alias", is_public=True,
        metadata={"served_model": "gpt-4.1-mini-2025-04-14"},
    )  # fmt: skip
    plain = create(hub, "alice", "alice/wordle", model_name="other", is_public=True)
    for run in (served, plain):
        push(hub, "alice", run.id, [rollout(0, 0, 1.0)])
        finalize(hub, "alice", run.id)
    with hub.session() as session:
        env = service.find_environment(session, "alice", "wordle", None)
        rows = {r.model: r.served_model for r in leaderboard(session, env, None)}
    assert rows == {"my-alias": "gpt-4.1-mini-2025-04-14", "other": None}


def test_leaderboard_can_be_limited_to_one_version(hub: Hub) -> None:
    for version, reward in (("0.1.0", 1.0), ("0.2.0", 0.5)):
        run = create(hub, "alice", "alice/wordle", version, is_public=True)
        push(hub, "alice", run.id, [rollout(0, 0, reward), rollout(1, 0, reward)])
        finalize(hub, "alice", run.id)
    with hub.session() as session:
        env = service.find_environment(session, "alice", "wordle", None)
        assert [(r.env_version, r.mean_reward) for r in leaderboard(session, env, None)] == [
            ("0.1.0", 1.0)
        ]
        only = leaderboard(session, env, None, version="0.2.0")
        assert [(r.env_version, r.mean_reward) for r in only] == [("0.2.0", 0.5)]


def test_finalize_reads_blobs_of_batches_without_partials(hub: Hub) -> None:
    """Batches pushed before migration evals_0002 have no partial sums: finalize reads them."""
    run = create(hub, "alice", "alice/wordle")
    push(hub, "alice", run.id, [rollout(0, 0, 1.0), rollout(0, 1, 0.0)])
    push(hub, "alice", run.id, [rollout(1, 0, 1.0), failed(1, 1)])
    with hub.session() as session:
        old = session.exec(select(EvaluationBatch).where(EvaluationBatch.seq == 1)).one()
        old.partial_json = None
        session.add(old)
        session.commit()
    done = finalize(hub, "alice", run.id)
    assert (done.n_rollouts, done.n_errors, done.n_examples) == (3, 1, 2)
    assert done.reward_mean == pytest.approx(2 / 3)


def test_finalize_twice_and_push_after_finalize_are_409_and_change_nothing(hub: Hub) -> None:
    run = create(hub, "alice", "alice/wordle")
    push(hub, "alice", run.id, [rollout(0)])
    first = finalize(hub, "alice", run.id)
    for attempt in (
        lambda: finalize(hub, "alice", run.id),
        lambda: push(hub, "alice", run.id, [rollout(1)]),
    ):
        with pytest.raises(HubError) as caught:
            attempt()
        assert caught.value.status == 409 and "already finalized" in caught.value.message
    with hub.session() as session:
        again = session.get(Evaluation, run.id)
        assert (
            again is not None
            and again.finalized_at == first.finalized_at
            and again.sample_count == 1
        )
        assert len(session.exec(select(EvaluationBatch)).all()) == 1


def test_duplicate_rollout_is_409_and_leaves_no_batch(hub: Hub) -> None:
    run = create(hub, "alice", "alice/wordle")
    push(hub, "alice", run.id, [rollout(0, 0)])
    blobs_before = sorted(p for p in Path(hub.store.root).rglob("*") if p.is_file())
    with pytest.raises(HubError) as caught:
        push(hub, "alice", run.id, [rollout(1, 0), rollout(0, 0)])
    assert caught.value.status == 409
    with hub.session() as session:
        assert session.get(Evaluation, run.id).sample_count == 1  # type: ignore[union-attr]
        assert len(session.exec(select(EvaluationBatch)).all()) == 1
    assert sorted(p for p in Path(hub.store.root).rglob("*") if p.is_file()) == blobs_before


def test_other_users_cannot_write_or_see_private_runs(hub: Hub) -> None:
    run = create(hub, "alice", "alice/wordle", is_public=False)
    with pytest.raises(HubError) as caught:
        push(hub, "bob", run.id, [rollout(0)])
    assert caught.value.status == 404  # bob cannot see a private run: it does not exist for him
    public = create(hub, "alice", "alice/wordle", is_public=True)
    with pytest.raises(HubError) as caught:
        push(hub, "bob", public.id, [rollout(0)])
    assert caught.value.status == 403
    with hub.session() as session:
        with pytest.raises(HubError):
            service.get_evaluation(session, run.id, hub.principal("bob"))
        assert service.get_evaluation(session, run.id, hub.principal("alice"))[0].id == run.id


def test_runs_on_a_private_environment_are_invisible_to_outsiders(hub: Hub) -> None:
    run = create(hub, "alice", "acme/secret", is_public=True)
    push(hub, "alice", run.id, [rollout(0)])
    finalize(hub, "alice", run.id)
    with hub.session() as session:
        for outsider in (None, hub.principal("bob")):
            page = service.list_evaluations(
                session, outsider, env=None, model=None, status=None, offset=0, limit=20
            )
            assert page.total == 0
            with pytest.raises(HubError) as caught:
                service.get_evaluation(session, run.id, outsider)
            assert caught.value.status == 404
        mine = service.list_evaluations(
            session, hub.principal("alice"), env=None, model=None, status=None, offset=0, limit=20
        )
        assert [e.id for e, _env, _owner in mine.items] == [run.id]


# -- the HTTP API on a real server ----------------------------------------------------------


README = """# Wordle

Guess the **hidden word** in six tries.

| reward | meaning |
|---|---|
| 1.0 | solved |

<script>alert("xss")</script>
[click](javascript:alert(1))
"""


def build_wheel(
    directory: Path,
    name: str,
    version: str,
    readme: str,
    summary: str,
    extra: dict[str, bytes] | None = None,
) -> Path:
    """A valid pure-Python wheel whose METADATA carries `readme` as its long description;
    `extra` adds files (path in the wheel: bytes)."""
    import base64
    import hashlib
    import zipfile

    module = name.replace("-", "_")
    dist_info = f"{module}-{version}.dist-info"
    files = {
        f"{module}/__init__.py": b"def load_environment(**kwargs):\n    return None\n",
        f"{dist_info}/METADATA": (
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: {summary}\n"
            f"Requires-Python: >=3.11\nDescription-Content-Type: text/markdown\n\n{readme}"
        ).encode(),
        f"{dist_info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        **(extra or {}),
    }
    record_lines = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record_lines.append(f"{path},sha256={digest},{len(data)}")
    record_lines.append(f"{dist_info}/RECORD,,")
    files[f"{dist_info}/RECORD"] = ("\n".join(record_lines) + "\n").encode()
    target = directory / f"{module}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, data in files.items():
            archive.writestr(path, data)
    return target


class RunningHub:
    """A hub with alice, bob and org acme: in-process (`inproc`) unless `live`, then a real
    `prime hub serve` (for clients that open their own connections)."""

    def __init__(
        self, root: Path, env: dict[str, str] | None = None, *, live: bool = False
    ) -> None:
        import httpx

        self.root = root
        settings = {"PRIME_HUB_UPLOADS_PER_MINUTE": "10000", **(env or {})}
        self._stack = ExitStack()
        try:
            accounts: HubAccounts
            if live:
                process = start_hub(root / "hub", env=settings)
                self._stack.callback(process.stop)
                self.http: Any = self._stack.enter_context(
                    httpx.Client(base_url=process.url, timeout=30)
                )
                accounts, self.url = process, process.url
            else:
                inproc = self._stack.enter_context(start_inproc_hub(root / "hub", env=settings))
                self.http = inproc.http
                accounts, self.url = inproc, inproc.url
            self.tokens = {"alice": accounts.add_user("alice"), "bob": accounts.add_user("bob")}
            self.tokens["bob-read"] = accounts.token_for("bob", ["read"])
            engine = open_database(accounts.settings)
            create_org(engine, "acme", ["alice"])
            engine.dispose()
        except BaseException:
            self._stack.close()
            raise

    def headers(self, who: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}"} if who else {}

    def get(self, path: str, who: str | None = None, **kwargs: Any) -> Any:
        return self.http.get(path, headers=self.headers(who), **kwargs)

    def post(self, path: str, who: str | None = None, **kwargs: Any) -> Any:
        headers = {**self.headers(who), **kwargs.pop("headers", {})}
        return self.http.post(path, headers=headers, **kwargs)

    def upload(
        self,
        who: str,
        owner: str,
        name: str,
        version: str,
        *,
        readme: str = README,
        summary: str = "",
        extra: dict[str, bytes] | None = None,
    ) -> None:
        """Publish through the twine endpoint, as `twine upload` would."""
        wheel = build_wheel(
            self.root, name, version, readme, summary or f"{name} environment", extra
        )
        fields, files = twine_upload_form(name, version, wheel.read_bytes())
        response = self.http.post(
            f"/{owner}/legacy/",
            auth=("__token__", self.tokens[who]),
            data={**fields, "summary": summary},
            files=files,
        )
        assert response.status_code == 200, response.text

    def set_env(self, who: str, owner: str, name: str, **fields: Any) -> None:
        response = self.http.patch(
            f"/api/v1/environmentshub/{owner}/{name}", headers=self.headers(who), json=fields
        )
        assert response.status_code == 200, response.text

    def create_eval(self, who: str, slug: str, model: str, **fields: Any) -> str:
        """Open a run of `model` on `slug` (named `SLUG--MODEL` unless `name` is given): its id."""
        created = self.post(
            "/api/v1/evaluations/",
            who,
            json={
                "name": f"{slug}--{model}",
                "environments": [{"slug": slug}],
                "model_name": model,
                **fields,
            },
        )
        assert created.status_code == 200, created.text
        return str(created.json()["evaluation_id"])

    def run_eval(
        self,
        who: str,
        slug: str,
        model: str,
        rewards: list[float | None],
        *,
        public: bool = True,
        batch: int = 50,
    ) -> str:
        """Create → push in batches → finalize; `None` rewards are pushed as errored rollouts."""
        evaluation_id = self.create_eval(
            who, slug, model, framework="prime", is_public=public, metrics={}, tags=["test"],
            metadata={},
        )  # fmt: skip
        samples = [
            rollout(i, 0, r) if r is not None else failed(i, 0) for i, r in enumerate(rewards)
        ]
        for start in range(0, len(samples), batch):
            pushed = self.post(
                f"/api/v1/evaluations/{evaluation_id}/samples",
                who,
                json={"samples": samples[start : start + batch]},
            )
            assert pushed.status_code == 200, pushed.text
        done = self.post(
            f"/api/v1/evaluations/{evaluation_id}/finalize",
            who,
            json={"metrics": {"avg_reward": 0.0}},
        )
        assert done.status_code == 200, done.text
        return str(evaluation_id)

    def close(self) -> None:
        self._stack.close()


@pytest.fixture(scope="module")
def running_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningHub]:
    hub = RunningHub(tmp_path_factory.mktemp("evals-hub"))
    hub.upload("alice", "alice", "wordle", "0.1.0", summary="Play wordle")
    hub.upload("alice", "alice", "wordle", "0.2.0", summary="Play wordle")
    hub.set_env("alice", "alice", "wordle", tags=["game", "multi-turn"])
    hub.upload("alice", "acme", "secret", "1.0.0", summary="A private one")
    hub.set_env("alice", "acme", "secret", visibility="private")
    yield hub
    hub.close()


def test_http_round_trip_and_leaderboard(running_hub: RunningHub) -> None:
    hub = running_hub
    created = hub.post(
        "/api/v1/evaluations/",
        "alice",
        json={
            "name": "wordle smoke",
            "environments": [{"slug": "alice/wordle"}],
            "model_name": "local/smollm2-135m",
            "framework": "verifiers",
            "metadata": {"n": 3},
            "metrics": {"avg_reward": 0.5},
            "tags": ["smoke"],
            "is_public": True,
            "team_id": None,
            "dataset": "wordle",
        },
    )
    assert created.status_code == 200, created.text
    body = created.json()
    evaluation_id = body["evaluation_id"]  # top-level, where the stock prime client reads it
    assert body["data"]["environment"] == {
        "id": body["data"]["environment"]["id"],
        "slug": "alice/wordle",
        "owner": "alice",
        "name": "wordle",
        "version": "0.2.0",
        "version_id": body["data"]["environment"]["version_id"],
    }
    assert body["data"]["status"] == "running" and body["data"]["metadata"] == {
        "dataset": "wordle",
        "n": 3,
    }
    first = hub.post(
        f"/api/v1/evaluations/{evaluation_id}/samples",
        "alice",
        json={"samples": [rollout(0, 0, 1.0), rollout(0, 1, 0.0), failed(1, 0)]},
    )
    assert first.json()["data"] == {
        "evaluation_id": evaluation_id,
        "accepted": 3,
        "batch": 1,
        "sample_count": 3,
    }
    # verifiers rows: no rollout index, `example_id` for the example
    second = hub.post(
        f"/api/v1/evaluations/{evaluation_id}/samples",
        "alice",
        json={"samples": [{"example_id": 1, "reward": 1.0}, {"example_id": 2, "reward": 1.0}]},
    )
    assert second.status_code == 200, second.text
    final = hub.post(f"/api/v1/evaluations/{evaluation_id}/finalize", "alice", json={})
    assert final.status_code == 200, final.text
    summary = final.json()["data"]["summary"]
    assert summary["reward_mean"] == pytest.approx(0.75) and summary["errors"] == 1
    assert summary["scored"] == 4 and summary["examples"] == 3

    page = hub.get(
        f"/api/v1/evaluations/{evaluation_id}/samples", params={"page": 2, "per_page": 2}
    ).json()
    assert page["total_count"] == 5
    assert [(s["example_index"], s["rollout_index"]) for s in page["data"]] == [(1, 0), (1, 1)]
    assert page["data"][0]["error"] == {"type": "RateLimitError", "message": "429 after 5 retries"}
    assert (
        hub.get(f"/api/v1/evaluations/{evaluation_id}", params={}).json()["data"]["status"]
        == "completed"
    )
    listed = hub.get(
        "/api/v1/evaluations/", params={"env": "alice/wordle", "model": "local/smollm2-135m"}
    ).json()
    assert evaluation_id in [e["id"] for e in listed["data"]]

    board = hub.get("/api/v1/environmentshub/alice/wordle/leaderboard").json()
    row = next(r for r in board["data"] if r["model"] == "local/smollm2-135m")
    assert row["evaluation_id"] == evaluation_id
    assert (row["mean_reward"], row["n"], row["rollouts"], row["errors"], row["env_version"]) == (
        0.75,
        3,
        4,
        1,
        "0.2.0",
    )


def test_http_bad_input_is_a_clear_4xx_and_changes_nothing(running_hub: RunningHub) -> None:
    hub = running_hub
    create = {
        "name": "x",
        "environments": [{"slug": "alice/wordle", "version": "0.1.0"}],
        "model_name": "m",
    }

    def refused(response: Any, status: int, fragment: str) -> None:
        assert response.status_code == status, response.text
        assert fragment in response.json()["detail"], response.json()

    refused(hub.post("/api/v1/evaluations/", None, json=create), 401, "needs an API token")
    refused(
        hub.post(
            "/api/v1/evaluations/",
            "alice",
            json={**create, "environments": [{"slug": "alice/nope"}]},
        ),
        404,
        "alice/nope not found",
    )
    refused(
        hub.post(
            "/api/v1/evaluations/",
            "alice",
            json={**create, "environments": [{"slug": "alice/wordle", "version": "9"}]},
        ),
        404,
        "known versions: 0.1.0, 0.2.0",
    )
    refused(
        hub.post(
            "/api/v1/evaluations/",
            "bob",
            json={**create, "environments": [{"slug": "acme/secret"}]},
        ),
        404,
        "acme/secret not found",
    )
    refused(hub.post("/api/v1/evaluations/", "bob-read", json=create), 403, "may not push results")
    refused(
        hub.post("/api/v1/evaluations/", "alice", json={**create, "model_name": ""}),
        400,
        "model_name",
    )
    refused(
        hub.post(
            "/api/v1/evaluations/",
            "alice",
            content=b"{nope",
            headers={"Content-Type": "application/json"},
        ),
        400,
        "not valid JSON",
    )

    evaluation_id = hub.post("/api/v1/evaluations/", "alice", json=create).json()["evaluation_id"]
    samples_url = f"/api/v1/evaluations/{evaluation_id}/samples"
    assert hub.post(samples_url, "alice", json={"samples": [rollout(0, 0, 1.0)]}).status_code == 200
    refused(
        hub.post(samples_url, "alice", json={"samples": [rollout(1, 0, 1.0), {"reward": 1}]}),
        400,
        "samples[1].example_index",
    )
    refused(
        hub.post(samples_url, "alice", json={"samples": [rollout(1, 0, None)]}),
        400,
        "neither a reward nor an error",
    )
    refused(hub.post(samples_url, "alice", json={"rows": []}), 400, '{"samples": [')
    refused(
        hub.post(samples_url, "alice", json={"samples": [rollout(5, 0), rollout(0, 0)]}),
        409,
        "example_index=0, rollout_index=0",
    )
    refused(
        hub.post(
            samples_url,
            "alice",
            json={
                "samples": [
                    {"example_index": i, "reward": 1} for i in range(MAX_SAMPLES_PER_BATCH + 1)
                ]
            },
        ),
        413,
        "at most 100000",
    )
    huge = (
        b'{"samples": ['
        + b",".join(
            [b'{"example_index": 1, "reward": 1.0, "info": "' + b"x" * 1024 * 1024 + b'"}'] * 33
        )
        + b"]}"
    )
    refused(
        hub.post(samples_url, "alice", content=huge, headers={"Content-Type": "application/json"}),
        413,
        "larger than this hub accepts",
    )
    refused(
        hub.post(samples_url, "bob", json={"samples": [rollout(1, 0)]}), 404, "not found"
    )  # a private run
    refused(
        hub.post("/api/v1/evaluations/0000/samples", "alice", json={"samples": [rollout(1, 0)]}),
        404,
        "not found",
    )
    # nothing half-written: still exactly the one good sample
    stored = hub.get(f"{samples_url}", "alice").json()
    assert stored["total_count"] == 1 and len(stored["data"]) == 1

    assert hub.post(f"/api/v1/evaluations/{evaluation_id}/finalize", "alice").status_code == 200
    refused(
        hub.post(f"/api/v1/evaluations/{evaluation_id}/finalize", "alice"), 409, "already finalized"
    )
    refused(
        hub.post(samples_url, "alice", json={"samples": [rollout(1, 0)]}), 409, "already finalized"
    )
    assert hub.get(samples_url, "alice").json()["total_count"] == 1


def test_http_private_environment_results_are_404_to_others(running_hub: RunningHub) -> None:
    hub = running_hub
    evaluation_id = hub.run_eval("alice", "acme/secret", "gpt-secret", [1.0, 0.5])
    for who in (None, "bob"):
        assert hub.get("/api/v1/environmentshub/acme/secret/leaderboard", who).status_code == 404
        assert hub.get(f"/api/v1/evaluations/{evaluation_id}", who).status_code == 404
        assert hub.get(f"/api/v1/evaluations/{evaluation_id}/samples", who).status_code == 404
        assert evaluation_id not in [
            e["id"] for e in hub.get("/api/v1/evaluations/", who).json()["data"]
        ]
        assert (
            hub.get("/api/v1/evaluations/", who, params={"env": "acme/secret"}).status_code == 404
        )
    board = hub.get("/api/v1/environmentshub/acme/secret/leaderboard", "alice").json()["data"]
    assert [r["model"] for r in board] == ["gpt-secret"]


def concurrent_pushes(hub: RunningHub, evaluation_id: str) -> None:
    """Eight batches at once, plus two racing copies of one batch: all serialised per run."""
    from concurrent.futures import ThreadPoolExecutor

    url = f"/api/v1/evaluations/{evaluation_id}/samples"
    batches = [
        [rollout(example, 0, 1.0) for example in range(b * 10, b * 10 + 10)] for b in range(8)
    ]
    with ThreadPoolExecutor(10) as pool:
        codes = list(
            pool.map(
                lambda batch: hub.post(url, "alice", json={"samples": batch}).status_code, batches
            )
        )
        racing = list(
            pool.map(
                lambda _: (
                    hub.post(url, "alice", json={"samples": [rollout(999, 0, 0.0)]}).status_code
                ),
                range(2),
            )
        )
    assert codes == [200] * 8
    assert racing == [200, 200]  # one batch sent twice is idempotent: stored once (below)
    stored = hub.get(url, "alice", params={"per_page": 1000}).json()
    keys = [(s["example_index"], s["rollout_index"]) for s in stored["data"]]
    assert stored["total_count"] == 81 and len(keys) == 81 and len(set(keys)) == 81


def test_http_concurrent_batches_on_sqlite(running_hub: RunningHub) -> None:
    concurrent_pushes(running_hub, running_hub.create_eval("alice", "alice/wordle", "c", name="c"))


@pytest.mark.postgres
def test_http_on_postgres_and_s3(tmp_path: Path) -> None:
    """The same API with the scale-out backends: PostgreSQL rows, sample blobs in S3 (moto)."""
    from tests.hub_server.services import postgres_bin, postgres_cluster, s3_server
    from tests.support import require

    require(postgres_bin() is not None, "PostgreSQL (Debian package postgresql)")
    with postgres_cluster() as database_url, s3_server("eval-blobs") as s3_env:
        hub = RunningHub(tmp_path, {"PRIME_HUB_DATABASE_URL": database_url, **s3_env})
        try:
            hub.upload("alice", "alice", "wordle", "0.1.0")
            evaluation_id = hub.run_eval(
                "alice", "alice/wordle", "pg-model", [1.0, 0.0, None, 1.0], batch=2
            )
            board = hub.get("/api/v1/environmentshub/alice/wordle/leaderboard").json()["data"]
            assert [(r["model"], r["rollouts"], r["errors"]) for r in board] == [("pg-model", 3, 1)]
            assert board[0]["mean_reward"] == pytest.approx(2 / 3)
            samples = hub.get(f"/api/v1/evaluations/{evaluation_id}/samples").json()
            assert [s["example_index"] for s in samples["data"]] == [0, 1, 2, 3]
            assert not (tmp_path / "hub" / "hub.sqlite3").exists()
            concurrent_pushes(hub, hub.create_eval("alice", "alice/wordle", "c", name="c"))
            private = hub.create_eval("bob", "alice/wordle", "p", name="p")
            assert hub.get(f"/api/v1/evaluations/{private}", "alice").status_code == 404
        finally:
            hub.close()


@pytest.fixture(scope="module")
def live_running_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningHub]:
    """A real server: the stock SDK opens its own connections."""
    hub = RunningHub(tmp_path_factory.mktemp("evals-live-hub"), live=True)
    hub.upload("alice", "alice", "wordle", "0.1.0", summary="Play wordle")
    hub.upload("alice", "alice", "wordle", "0.2.0", summary="Play wordle")
    yield hub
    hub.close()


def test_stock_prime_evals_sdk_round_trip(
    live_running_hub: RunningHub, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The public `prime-evals` SDK from PyPI, pointed at this hub by PRIME_API_BASE_URL."""
    running_hub = live_running_hub
    try:
        from prime_evals import APIClient, EvalsClient
    except ImportError:
        from tests.support import require

        require(False, "prime-evals (dev extra)")
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.prime/config.json of the machine
    monkeypatch.setenv("PRIME_API_BASE_URL", f"{running_hub.url}/api/v1")
    monkeypatch.setenv("PRIME_API_KEY", running_hub.tokens["bob"])
    client = EvalsClient(APIClient())
    created = client.create_evaluation(
        name="wordle--stock-sdk",
        environments=[{"slug": "alice/wordle"}],  # resolved by the SDK via GET …/@latest
        model_name="stock-sdk-model",
        framework="verifiers",
        metadata={"num_examples": 3, "rollouts_per_example": 2},
        metrics={"avg_reward": 0.5},
        is_public=True,
    )
    evaluation_id = created["evaluation_id"]
    rows = [  # verifiers' flat rows: example id only, rollouts numbered by the hub
        {
            "example_id": i // 2,
            "reward": float(i % 2),
            "task": "wordle",
            "prompt": [],
            "completion": [],
        }
        for i in range(6)
    ]
    assert client.push_samples(evaluation_id, rows)["samples_pushed"] == 6
    client.finalize_evaluation(evaluation_id, metrics={"avg_reward": 0.5})
    got = client.get_evaluation(evaluation_id)["data"]
    assert got["environment"]["version"] == "0.2.0" and got["summary"]["examples"] == 3
    samples = client.get_samples(evaluation_id, page=1, limit=4)["data"]
    assert [(s["example_index"], s["rollout_index"]) for s in samples] == [
        (0, 0),
        (0, 1),
        (1, 0),
        (1, 1),
    ]
    listed = client.list_evaluations(env_name="alice/wordle", limit=100)["data"]
    assert evaluation_id in [e["id"] for e in listed]
    board = running_hub.get("/api/v1/environmentshub/alice/wordle/leaderboard").json()["data"]
    row = next(r for r in board if r["model"] == "stock-sdk-model")
    assert (row["mean_reward"], row["rollouts"], row["user"]) == (0.5, 6, "bob")


def test_migration_is_on_one_linear_history_and_downgrades(tmp_path: Path) -> None:
    from alembic import command
    from alembic.script import ScriptDirectory
    from sqlalchemy import inspect

    from hub_server.core.db import alembic_config, make_engine, migrate

    config = alembic_config()
    assert len(ScriptDirectory.from_config(config).get_heads()) == 1
    engine = make_engine(f"sqlite:///{tmp_path / 'hub.sqlite3'}")
    migrate(engine)
    assert {"evaluation", "evaluationbatch"} <= set(inspect(engine).get_table_names())
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, "hub_0001")
    assert "evaluation" not in inspect(engine).get_table_names()
    migrate(engine)
    assert "evaluationbatch" in inspect(engine).get_table_names()
    engine.dispose()


def test_the_revisions_since_hub_0005_downgrade_with_runs_and_versions_stored(
    tmp_path: Path,
) -> None:
    """Batch mode copied `version` and `evaluation` and dropped the old tables, which the files,
    batches and samples pointing at them refused (FOREIGN KEY constraint failed)."""
    from alembic import command
    from sqlalchemy import inspect

    from hub_server.core.db import alembic_config, migrate
    from tests.hub_server.hardening_hub import HardenedHub

    hub = HardenedHub(tmp_path)
    token = {"Authorization": f"Bearer {hub.tokens['alice']}"}
    with hub.client() as client:
        run = client.post("/api/v1/evaluations/", headers=token, json={
            "name": "r", "environments": [{"slug": "alice/wordle"}], "model_name": "m"}).json()  # fmt: skip
        run_id = run["data"]["id"]
        samples = {"samples": [{"example_index": 0, "rollout_index": 0, "reward": 1.0}]}
        assert client.post(f"/api/v1/evaluations/{run_id}/samples", headers=token,
                           json=samples).status_code == 200  # fmt: skip
        assert client.post(f"/api/v1/evaluations/{run_id}/finalize", headers=token,
                           json={}).status_code == 200  # fmt: skip
    config = alembic_config()
    with hub.engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, "hub_0005")
    columns = {c["name"] for c in inspect(hub.engine).get_columns("evaluation")}
    assert "verification" not in columns
    assert "rubric_json" not in {c["name"] for c in inspect(hub.engine).get_columns("version")}
    with hub.engine.connect() as connection:
        assert connection.exec_driver_sql("SELECT id FROM evaluation").scalars().all() == [run_id]
    migrate(hub.engine)
    assert "verification" in {c["name"] for c in inspect(hub.engine).get_columns("evaluation")}
