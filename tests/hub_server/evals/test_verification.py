"""Verified runs: the hub re-scores a finalized run with its exact environment version, in a
sandbox, and marks it verified or shows the disagreement; the leaderboard can show verified
runs only. The comparison and the restart-safe claiming are tested on their own; the whole
path runs for real (a `prime env init` environment pushed with `prime env push`'s code, uv,
the Docker sandbox), with uv offline (its cache holds the SDK's dependencies)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from rich.console import Console
from sqlmodel import Session, create_engine, select

from hub_client.client import HubClient
from hub_server.accounts.models import User
from hub_server.core.ids import utcnow
from hub_server.core.settings import HubSettings
from hub_server.evals.models import Evaluation, EvaluationStatus, VerificationStatus
from hub_server.evals.verification import (
    MAX_ATTEMPTS,
    NotVerifiable,
    _rescore_in_sandbox,
    claim_next,
    compare,
)
from hub_server.registry.models import Version
from prime_cli.env.project import load_project
from prime_cli.env.publish import push_environment
from prime_cli.env.scaffold import create_scaffold
from prime_cli.eval import commands as eval_commands
from prime_cli.main import cli
from prime_env.loading import load
from registry_index.rubric_spec import RubricSpec
from sandbox import factory as sandbox_factory
from sandbox.backends import local as local_backend
from sandbox.backends.docker import docker_available, image_exists
from sandbox.limits import DEFAULT_IMAGE
from tests.hub_server.hardening_hub import HardenedHub
from tests.hub_server.inproc import InProcessHub, start_inproc_hub
from tests.support import require

EVALS = "/api/v1/evaluations"

# -- the verdict --------------------------------------------------------------------------


def pushed(reward: float, correct: float, length: float = 3.0) -> dict[str, Any]:
    return {"example_index": 0, "rollout_index": 0, "reward": reward,
            "rewards": {"correct": correct}, "metrics": {"length": length}}  # fmt: skip


def ours(reward: float, correct: float, length: float = 3.0) -> dict[str, Any]:
    return {"reward": reward, "rewards": {"correct": correct}, "metrics": {"length": length}}


DECLARED = RubricSpec.model_validate({"correct": {"weight": 1.0, "range": [0, 1]},
                                      "length": {"weight": 0, "range": [0, 100]}})  # fmt: skip
WEIGHTS = {"correct": 1.0, "length": 0.0}


def test_every_score_matching_is_verified_and_anything_else_is_not() -> None:
    records = [pushed(1.0, 1.0), pushed(0.0, 0.0)]
    status, detail = compare(
        records, {"weights": WEIGHTS, "scores": [ours(1.0, 1.0), ours(0.0, 0.0)]}, DECLARED
    )
    assert status == VerificationStatus.VERIFIED and "every score matches" in detail
    status, detail = compare(
        records, {"weights": WEIGHTS, "scores": [ours(0.0, 0.0), ours(0.0, 0.0)]}, DECLARED
    )
    assert status == VerificationStatus.DISAGREED and "1 of 2 samples score differently" in detail
    status, detail = compare(
        records, {"weights": WEIGHTS, "scores": [ours(1.0, 1.0), ours(0.0, 0.0, 4.0)]}, None
    )
    assert status == VerificationStatus.DISAGREED  # a metric differs
    status, detail = compare(
        records, {"weights": WEIGHTS, "scores": [ours(1.0, 1.0), {"error": "KeyError: x"}]}, None
    )
    assert status == VerificationStatus.DISAGREED and "could not be re-scored" in detail
    status, detail = compare(records, {"weights": {"correct": 2.0, "length": 0.0},
                                       "scores": [ours(1.0, 1.0), ours(0.0, 0.0)]}, DECLARED)  # fmt: skip
    assert status == VerificationStatus.DISAGREED and "declares" in detail
    status, detail = compare(records, {"weights": WEIGHTS, "scores": [
        ours(1.0, 1.0), {"mismatch": "its answer is not the environment's for example 0"}]}, None)  # fmt: skip
    assert status == VerificationStatus.DISAGREED
    assert "1 of 2 samples are not the environment's own tasks" in detail and "answer" in detail
    status, _ = compare(records, {"weights": WEIGHTS, "scores": [ours(1.0, 1.0)]}, None)
    assert status == VerificationStatus.FAILED


def test_the_hub_never_re_scores_where_the_rubric_sees_its_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A machine with neither Docker nor bubblewrap, where the operator let `auto` fall back
    to the unisolated backend for their own code: anyone's rubric still never runs there."""
    monkeypatch.setattr(sandbox_factory, "_docker_problem", lambda: "no Docker daemon")
    monkeypatch.setattr(local_backend, "bwrap_problem", lambda: "bubblewrap is not installed")
    monkeypatch.setenv(sandbox_factory.ALLOW_UNISOLATED, "1")
    assert sandbox_factory.resolve_backend("auto") == "unisolated"
    settings = HubSettings(data_dir=tmp_path, verify_sandbox="auto")
    with pytest.raises(NotVerifiable, match="no isolating sandbox"):
        _rescore_in_sandbox(settings, tmp_path, [tmp_path / "sums-0.1.0-py3-none-any.whl"],
                            "admin/sums@0.1.0", {}, [pushed(1.0, 1.0)], tmp_path / "s.jsonl")  # fmt: skip


# -- claiming survives restarts -----------------------------------------------------------


def test_claims_are_single_restart_safe_and_bounded(tmp_path: Path) -> None:
    hub = HardenedHub(tmp_path)
    settings = HubSettings(data_dir=tmp_path, verify_sandbox="docker", verify_timeout_seconds=60)
    runs = {}
    with Session(hub.engine) as session:
        users = {u.username: u.id for u in session.exec(select(User))}
        env_version = session.exec(select(Version)).first()
        assert env_version is not None
        # Each account has one run under way at most (evals.verification_queue), so each
        # case is another account's.
        for name, user, status, started, attempts in (
            ("waiting", "alice", VerificationStatus.PENDING, None, 0),
            ("fresh", "bob", VerificationStatus.RUNNING, utcnow(), 1),  # a worker is on it now
            ("orphan", "carol", VerificationStatus.RUNNING, utcnow() - timedelta(hours=1), 1),  # it died
            ("hopeless", "alice", VerificationStatus.RUNNING, utcnow() - timedelta(hours=1),
             MAX_ATTEMPTS),
        ):  # fmt: skip
            run = Evaluation(name=name, environment_id=env_version.environment_id,
                             version_id=env_version.id, env_version=env_version.version,
                             user_id=users[user], model_name="m", status=EvaluationStatus.COMPLETED,
                             finalized_at=utcnow(), verification=status,
                             verification_started_at=started, verification_attempts=attempts)  # fmt: skip
            session.add(run)
            session.flush()
            runs[name] = run.id
        session.commit()
    claimed = {claim_next(hub.engine, settings) for _ in range(4)}
    assert claimed == {runs["waiting"], runs["orphan"], None}
    with Session(hub.engine) as session:
        hopeless = session.get(Evaluation, runs["hopeless"])
        fresh = session.get(Evaluation, runs["fresh"])
        assert hopeless is not None and hopeless.verification == VerificationStatus.FAILED
        assert fresh is not None and fresh.verification == VerificationStatus.RUNNING


# -- what the board shows ------------------------------------------------------------------


def test_a_disagreed_run_never_ranks_and_the_board_can_show_verified_runs_only(
    tmp_path: Path,
) -> None:
    hub = HardenedHub(tmp_path)
    token = {"Authorization": f"Bearer {hub.tokens['alice']}"}
    verdicts = {}
    with hub.client() as client:

        def finished(model: str, rewards: list[float], verdict: VerificationStatus) -> None:
            run = client.post(f"{EVALS}/", headers=token, json={
                "name": model, "environments": [{"slug": "alice/wordle"}], "model_name": model,
                "is_public": True}).json()["data"]["id"]  # fmt: skip
            samples = [{"example_index": i, "rollout_index": 0, "reward": r}
                       for i, r in enumerate(rewards)]  # fmt: skip
            assert client.post(f"{EVALS}/{run}/samples", headers=token,
                               json={"samples": samples}).status_code == 200  # fmt: skip
            assert client.post(f"{EVALS}/{run}/finalize", headers=token, json={}).status_code == 200
            verdicts[run] = verdict

        finished("honest", [1.0, 0.0] * 50, VerificationStatus.VERIFIED)
        finished("honest", [1.0] * 100, VerificationStatus.DISAGREED)  # its better run, forged
        finished("forged", [1.0] * 100, VerificationStatus.DISAGREED)
        finished("waiting", [0.0, 0.0, 1.0] * 30, VerificationStatus.PENDING)
        with Session(hub.engine) as session:  # the worker's verdicts
            for run_id, verdict in verdicts.items():
                run = session.get(Evaluation, run_id)
                assert run is not None
                run.verification = verdict
                session.add(run)
            session.commit()
        board = client.get("/api/v1/environmentshub/alice/wordle/leaderboard").json()["data"]
        only = client.get("/api/v1/environmentshub/alice/wordle/leaderboard",
                          params={"verified": "true"}).json()["data"]  # fmt: skip
        page = client.get("/alice/wordle").text
    assert [(row["model"], row["mean_reward"], row["verified"]) for row in board] == [
        ("honest", 0.5, True),
        ("waiting", pytest.approx(1 / 3), False),
    ]
    assert [row["model"] for row in only] == ["honest"]
    table = page.split('<table class="leaderboard">', 1)[1].split("</table>", 1)[0]
    assert ">honest<" in table and ">forged<" not in table


# -- the whole path, for real -------------------------------------------------------------


def require_backend(backend: str) -> None:
    if backend == "docker":
        require(docker_available() and image_exists(DEFAULT_IMAGE), f"Docker with {DEFAULT_IMAGE}")
    else:
        require(local_backend.bwrap_problem() is None, "bubblewrap")


@contextmanager
def hub_verifying_in(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str = "sums", **env: str
) -> Iterator[InProcessHub]:
    """A hub that verifies runs in `backend`, with the `prime env init` environment `name`
    pushed by `admin` (a name of its own per test: an environment is imported once per
    process)."""
    require_backend(backend)
    monkeypatch.setenv("UV_OFFLINE", "1")  # tests reach nothing but loopback: uv's cache only
    settings = {"PRIME_HUB_VERIFY_SANDBOX": backend, "PRIME_HUB_VERIFY_POLL_SECONDS": "0.2"}
    with start_inproc_hub(tmp_path / "hub", env={**settings, **env}) as hub:
        push_scaffold(hub, tmp_path, name)
        yield hub


def push_scaffold(
    hub: InProcessHub, root: Path, name: str, token: str | None = None, owner: str = "admin",
    edit: Callable[[str], str] | None = None,
) -> None:  # fmt: skip
    """`prime env init NAME` (its module text passed through `edit`) pushed by `owner`."""
    directory = create_scaffold(name, root)
    if edit is not None:
        module = directory / f"{name}.py"
        module.write_text(edit(module.read_text()))
    with HubClient(hub.url, token or hub.admin_token, transport=hub.transport) as client:
        push_environment(
            client, load_project(directory), owner, visibility=None, console=Console(stderr=True)
        )


@pytest.fixture
def verifying_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[InProcessHub]:
    with hub_verifying_in("docker", tmp_path, monkeypatch) as hub:
        yield hub


def finished_run(
    hub: InProcessHub, model: str, completions: list[tuple[str, float]],
    answers: list[str] | None = None, *, env_name: str = "sums", token: str | None = None,
) -> str:  # fmt: skip
    """A run pushed as `prime eval push` would, of the environment's first tasks as its runner
    records them, each completion with the reward claimed (and, given `answers`, each task's
    answer replaced)."""
    env = load(str(hub.data_dir.parent / env_name))
    tasks = env.get_eval_tasks()
    api = hub.client(token or hub.admin_token)
    run = api.post(f"{EVALS}/", json={"name": model, "model_name": model, "is_public": True,
                                      "environments": [{"slug": f"admin/{env_name}"}]}).json()["data"]["id"]  # fmt: skip
    samples = [
        {"example_index": i, "rollout_index": 0, "task_id": tasks[i].id,
         "prompt": env.harness.build_prompt(tasks[i]),
         "completion": [{"role": "assistant", "content": text}],
         "answer": tasks[i].answer if answers is None else answers[i], "info": tasks[i].info,
         "reward": claimed, "rewards": {"correct_answer": claimed},
         "metrics": {"answer_length": float(len(text))}}
        for i, (text, claimed) in enumerate(completions)
    ]  # fmt: skip
    assert api.post(f"{EVALS}/{run}/samples", json={"samples": samples}).status_code == 200
    finalized = api.post(f"{EVALS}/{run}/finalize", json={})
    assert finalized.json()["data"]["verification"] == "pending"
    return str(run)


def settled(hub: InProcessHub, runs: list[str]) -> dict[str, dict[str, Any]]:
    deadline = time.monotonic() + 600  # a bound for a hung worker only; a loaded host is slow
    while True:
        states = {run: hub.http.get(f"{hub.url}{EVALS}/{run}").json()["data"] for run in runs}
        if all(s["verification"] not in ("pending", "running") for s in states.values()):
            return states
        assert time.monotonic() < deadline, states
        time.sleep(0.5)


@pytest.mark.docker
@pytest.mark.xdist_group("docker")  # starts Docker sandboxes (tests/conftest.py)
def test_an_honest_run_is_verified_a_forged_one_disagrees_and_the_board_can_show_verified_only(
    verifying_hub: InProcessHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub = verifying_hub
    honest = finished_run(hub, "honest", [("It is 42", 1.0), ("It is 71", 0.0), ("63", 1.0)])
    # Consistent with the declared weights, so the push checks pass; but the completions are
    # wrong: only the re-scoring can tell.
    forged = finished_run(hub, "forged", [("It is 41", 1.0), ("It is 70", 1.0), ("62", 1.0)])
    # Wrong completions made right by pushing tasks whose answers fit them.
    rigged = finished_run(hub, "rigged", [("It is 41", 1.0), ("It is 70", 1.0), ("62", 1.0)],
                          answers=["41", "70", "62"])  # fmt: skip
    states = settled(hub, [honest, forged, rigged])
    detail = {run: state["verification_detail"] for run, state in states.items()}
    assert states[honest]["verification"] == "verified", detail
    assert states[forged]["verification"] == "disagreed", detail
    assert "3 of 3 samples score differently" in states[forged]["verification_detail"]
    assert states[rigged]["verification"] == "disagreed", detail
    assert (
        "3 of 3 samples are not the environment's own tasks"
        in (states[rigged]["verification_detail"])
    )
    board = hub.http.get(f"{hub.url}/api/v1/environmentshub/admin/sums/leaderboard").json()["data"]
    assert {row["model"]: row["verified"] for row in board} == {"honest": True}  # forged: unranked
    only = hub.http.get(f"{hub.url}/api/v1/environmentshub/admin/sums/leaderboard",
                        params={"verified": "true"}).json()["data"]  # fmt: skip
    assert [row["model"] for row in only] == ["honest"]
    for params in ({}, {"lb_verified": "true"}):
        page = hub.http.get(f"{hub.url}/admin/sums", params=params).text
        table = page.split('<table class="leaderboard">', 1)[1].split("</table>", 1)[0]
        assert ">honest<" in table and ">forged<" not in table and "badge verified" in table
    run_page = hub.http.get(f"{hub.url}/admin/sums/evals/{forged}").text
    assert "disagreed" in run_page and "score differently" in run_page
    # What `prime eval list` prints for them, on a terminal wide enough not to fold a row.
    monkeypatch.setattr(eval_commands, "_hub", lambda: HubClient(hub.url, hub.admin_token,
                                                                 transport=hub.transport))  # fmt: skip
    monkeypatch.setattr(eval_commands, "console", Console(width=250))
    listed = CliRunner().invoke(cli, ["eval", "list", "-e", "admin/sums"])
    assert listed.exit_code == 0, listed.output
    rows = {line.split("│")[3].strip(): line for line in listed.output.splitlines() if "│" in line}
    assert "verified" in rows["honest"] and "disagreed" in rows["forged"], listed.output


def _sleeping_rubric(module: str) -> str:
    """The scaffold's reward function made to sleep far past any verification timeout."""
    head = "def correct_answer(completion: Any, answer: str) -> float:\n"
    assert head in module
    return module.replace(head, head + "    import time\n\n    time.sleep(3600)\n")


def _one_running(hub: InProcessHub, runs: list[str]) -> str:
    """The first of `runs` whose verification is under way (waiting for one to start)."""
    deadline = time.monotonic() + 600  # a bound for a hung worker only
    while True:
        for run in runs:
            if hub.http.get(f"{hub.url}{EVALS}/{run}").json()["data"]["verification"] == "running":
                return run
        assert time.monotonic() < deadline, "no run started verifying"
        time.sleep(0.2)


def test_an_account_with_twenty_slow_runs_queued_delays_another_by_at_most_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 37's acceptance: first in, first out made an honest run wait for every slow run
    queued before it (N x the timeout); now it waits for at most the one under way. On
    bubblewrap, the backend of a hub without Docker (the order does not depend on it). The hub
    then stops with a slow run under way, which goes back to the queue."""
    with hub_verifying_in("local", tmp_path, monkeypatch, "fairsums",
                          PRIME_HUB_VERIFY_TIMEOUT_SECONDS="10") as hub:  # fmt: skip
        push_scaffold(hub, tmp_path, "slowpoke", edit=_sleeping_rubric)
        slow = [finished_run(hub, f"slow-{i}", [("It is 42", 1.0)], env_name="slowpoke")
                for i in range(20)]  # fmt: skip
        bob = hub.add_user("bob")
        honest = finished_run(hub, "honest", [("It is 42", 1.0), ("It is 71", 0.0)],
                              env_name="fairsums", token=bob)  # fmt: skip
        # Fails as soon as a second slow run starts before the honest one has (FIFO: at once).
        deadline = time.monotonic() + 600  # a bound for a hung worker only
        while True:
            states = {run: hub.http.get(f"{hub.url}{EVALS}/{run}").json()["data"]
                      for run in [honest, *slow[:3]]}  # fmt: skip
            if states[honest]["verification"] not in ("pending", "running"):
                break
            started = [run for run in slow[:3] if states[run]["verification"] != "pending"]
            assert len(started) < 2 or states[honest]["verification"] == "running", states
            assert time.monotonic() < deadline, states
            time.sleep(0.2)
        assert states[honest]["verification"] == "verified", states[honest]["verification_detail"]
        database = create_engine(hub.settings.resolved_database_url)
        with Session(database) as session:
            runs = {run.id: run for run in session.exec(select(Evaluation))}
        interrupted = _one_running(hub, slow)
    # The hub stopped with a slow run under way: its sandbox was stopped and the run waits in
    # the queue again, the attempt not counted (it used to outlive the hub, left `running`).
    with Session(database) as session:
        after = session.get(Evaluation, interrupted)
    assert after is not None and after.verification == VerificationStatus.PENDING
    assert after.verification_attempts == 0 and after.verification_started_at is None
    assert "the hub stopped while re-scoring it" in (after.verification_detail or "")
    mine = runs[honest]
    assert mine.verification_started_at is not None
    started_before = [
        run for run_id, run in runs.items() if run_id in slow and run.verification_started_at
        and run.verification_started_at < mine.verification_started_at
    ]  # fmt: skip
    assert len(started_before) == 1, [(r.name, r.verification_started_at) for r in started_before]
    (first,) = started_before
    assert first.verification == VerificationStatus.FAILED
    assert "took more than 10 s" in (first.verification_detail or "")
    assert first.verified_at is not None and mine.verification_started_at >= first.verified_at
