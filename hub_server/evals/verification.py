"""Verified runs: the hub re-scores a finalized run itself and says whether it agrees.

A run's scores are whatever its pusher sent. A verified run is one whose every scored sample
the hub re-scored with the run's exact environment version and found equal: a worker in the
hub process installs that version's wheel, the SDK this hub serves and what they need, into
a directory of its own (`verification_install`: each name from where `prime env install`
takes it, within a disk budget, a uv cache of its own); then, in a fresh sandbox (no
network, `sandbox`'s public API), it loads the environment and runs its rubric on the pushed
prompts and completions (`prime_env.rescore`: no model call), and compares.

What the hub holds meanwhile is bounded: the run's samples are streamed from their batches,
and past `verify_max_samples` or `verify_max_sample_bytes` the read stops (`failed`); only
their scores stay in memory. The environment's code can rewrite `out.json`: the hub reads no
more of it than the samples' scores take (`out_json_limit`) and parses it with a bound.

- `verified`: every scored sample's reward and components match (within 1e-6, relative);
- `disagreed`: some do not, some samples are not the environment's own tasks (their prompt,
  answer or info is not what the environment gives that example), or the environment's
  rubric is not the one its version declares: the detail says how many and gives an example;
- `failed`: the hub could not re-score (not installable, no sandbox, the environment does not
  load, too large): never shown as verified, and the detail says why.

Status lives in the database (`Evaluation.verification*`), so it survives restarts: runs are
claimed in a fair order (`verification_queue`: accounts in turn, one run at a time per
account, an hourly budget each) with a conditional update (one worker each, across
processes), and a run left `running` past twice the timeout (a worker that died) is claimed
again, up to three attempts. A hub that stops mid-verification stops that run's sandbox and
puts the run back in the queue, the attempt not counted (`Stopping`).
The worker runs in the hub process with bounded concurrency (`PRIME_HUB_VERIFY_CONCURRENCY`)
and is off unless `PRIME_HUB_VERIFY_SANDBOX` names a backend (docs/security.md).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import logging
import math
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from hub_server.core.blobstore import BlobStorage
from hub_server.core.ids import utcnow
from hub_server.core.settings import HubSettings
from hub_server.evals.models import Evaluation, EvaluationStatus, VerificationStatus
from hub_server.evals.samples import decode_record
from hub_server.evals.verification_install import InstallRefused, fetch, hub_wheels, install
from hub_server.evals.verification_queue import can_queue, snapshot, try_claim
from hub_server.registry.models import DistFile, Version
from hub_server.registry.views import declared_rubric
from registry_index.nesting import nests_deeper_than
from registry_index.rubric_spec import RubricSpec
from registry_index.schemas.versions import FileKind

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 3
_TOLERANCE = 1e-6
_MAX_DETAIL = 2000
_STOP_GRACE_S = 60.0
"""How long a stopping hub waits for a verification to let go (an install step in progress
cannot be interrupted; a sandbox can)."""
# The sandbox of one verification: room for the environment's install (the SDK's
# dependencies are ~60 MiB) and the run's samples.
_TRANSFER_BYTES = 256 << 20
_RESCORE = (
    "import site, sys; site.addsitedir('/work/site'); "
    "from prime_env.rescore import main; sys.exit(main(['/work/rescore/request.json']))"
)


class NotVerifiable(Exception):
    """The run cannot be re-scored; the message says why (a `failed` verification)."""


class Stopping:
    """The worker's shutdown, seen from the threads that verify: once the hub stops, the
    sandboxes under way are stopped (their calls return at once) and no new step begins, so
    each run ends promptly and goes back to the queue instead of outliving the hub."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._boxes: set[Any] = set()

    @property
    def stopped(self) -> bool:
        return self._event.is_set()

    def stop(self) -> None:
        self._event.set()
        with self._lock:
            boxes = list(self._boxes)
        for box in boxes:
            box.stop()

    def check(self) -> None:
        if self.stopped:
            raise NotVerifiable("the hub stopped")

    @contextlib.contextmanager
    def watching(self, box: Any) -> Iterator[None]:
        """Stop `box` if the hub stops while it runs."""
        with self._lock:
            self._boxes.add(box)
        try:
            if self.stopped:
                box.stop()
            yield
        finally:
            with self._lock:
                self._boxes.discard(box)


# -- asking for one -------------------------------------------------------------------------


def enabled(settings: HubSettings) -> bool:
    return settings.verify_sandbox != "off"


def request_verification(session: Session, settings: HubSettings, evaluation: Evaluation) -> None:
    """Mark a run just finalized for re-scoring (in the caller's transaction), when
    verification is on and its version has a wheel to install."""
    if not enabled(settings) or evaluation.n_rollouts == 0:
        return
    wheel = session.exec(
        select(DistFile.id).where(
            DistFile.version_id == evaluation.version_id, DistFile.kind == FileKind.WHEEL
        )
    ).first()
    if wheel is None:
        return
    if not can_queue(session, settings, evaluation.user_id):
        evaluation.verification = VerificationStatus.SKIPPED
        evaluation.verification_detail = (
            f"not queued for verification: this account already has "
            f"{settings.verify_max_pending_per_account} runs waiting, the most the hub queues "
            "per account"
        )
        return
    evaluation.verification = VerificationStatus.PENDING
    evaluation.verification_detail = None


# -- claiming -------------------------------------------------------------------------------


def claim_next(engine: Engine, settings: HubSettings) -> str | None:
    """Take the next waiting run in the fair order (`verification_queue`); its id, or None.
    A run whose worker died three times is given up as `failed`."""
    with Session(engine) as session:
        for _ in range(5):
            queue = snapshot(session, settings)
            session.rollback()  # the snapshot's read ends before any claim
            lost = False
            for run in queue.order:
                if run.attempts >= MAX_ATTEMPTS:
                    _finish(engine, run.id, VerificationStatus.FAILED,
                            f"gave up after {run.attempts} attempts (the worker stopped each time)")  # fmt: skip
                    continue
                if run.account in queue.busy:
                    continue
                if try_claim(session, settings, run):
                    return run.id
                lost = True  # another worker was faster: look again
                break
            if not lost:
                return None
    return None


def _finish(engine: Engine, run_id: str, status: VerificationStatus, detail: str) -> None:
    with Session(engine) as session:
        session.execute(
            sa.update(Evaluation)
            .where(col(Evaluation.id) == run_id)
            .values(
                verification=status,
                verification_detail=detail[:_MAX_DETAIL],
                verified_at=utcnow(),
            )
        )
        session.commit()


# -- re-scoring -----------------------------------------------------------------------------


def verify(
    engine: Engine, store: BlobStorage, settings: HubSettings, run_id: str,
    stopping: Stopping | None = None,
) -> None:  # fmt: skip
    """Re-score one claimed run and record the outcome (never raises for the run's sake); a
    run the hub's shutdown interrupted waits in the queue again."""
    stopping = stopping or Stopping()
    try:
        status, detail = _verify(engine, store, settings, run_id, stopping)
    except NotVerifiable as exc:
        status, detail = VerificationStatus.FAILED, str(exc)
    except Exception as exc:
        if not stopping.stopped:
            log.exception("verification of evaluation %s failed", run_id)
        status, detail = VerificationStatus.FAILED, f"the hub could not re-score it: {exc}"
    if stopping.stopped:
        _requeue(engine, run_id)
    else:
        _finish(engine, run_id, status, detail)


def _requeue(engine: Engine, run_id: str) -> None:
    """Back to the queue, the attempt not counted: the hub stopped, not the run."""
    attempts = col(Evaluation.verification_attempts)
    with Session(engine) as session:
        session.execute(
            sa.update(Evaluation)
            .where(
                col(Evaluation.id) == run_id,
                col(Evaluation.verification) == VerificationStatus.RUNNING,
            )
            .values(
                verification=VerificationStatus.PENDING,
                verification_started_at=None,
                verification_attempts=sa.case((attempts > 0, attempts - 1), else_=0),
                verification_detail=(
                    "the hub stopped while re-scoring it; it waits in the queue again"
                ),
            )
        )
        session.commit()


def _verify(
    engine: Engine, store: BlobStorage, settings: HubSettings, run_id: str, stopping: Stopping
) -> tuple[VerificationStatus, str]:
    with Session(engine, expire_on_commit=False) as session:
        evaluation = session.get(Evaluation, run_id)
        if evaluation is None or evaluation.status != EvaluationStatus.COMPLETED:
            raise NotVerifiable("the run is not a finalized run")
        version = session.get(Version, evaluation.version_id)
        if version is None:
            raise NotVerifiable("its environment version is gone")
        if evaluation.n_rollouts > settings.verify_max_samples:
            raise NotVerifiable(_too_many(evaluation.n_rollouts, settings))
        env = evaluation.environment
        spec = f"{env.owner.name}/{env.name}@{version.version}"
        try:
            wheels = hub_wheels(session, env.owner_id, version.id)
        except InstallRefused as exc:
            raise NotVerifiable(f"the environment could not be installed: {exc}") from None
        batch_keys = [batch.blob_key for batch in evaluation.batches]
        metadata = evaluation.metadata_json
        declared = declared_rubric(version)
    with tempfile.TemporaryDirectory(prefix="hub-verify-") as scratch:
        work = Path(scratch)
        samples = work / "samples.jsonl"
        pushed = _collect_samples(store, batch_keys, settings, samples)
        if not pushed.records:
            raise NotVerifiable("the run has no scored sample")
        env_args = pushed.env_args if pushed.env_args is not None else _run_env_args(metadata)
        wheel_paths = fetch(store, wheels, work / "wheels")
        stopping.check()
        rescored = _rescore_in_sandbox(
            settings, work, wheel_paths, spec, env_args, pushed.records, samples, stopping
        )
    return compare(pushed.records, rescored, declared)


def _too_many(count: int, settings: HubSettings) -> str:
    return (
        f"the run has more than {settings.verify_max_samples} scored samples ({count}); the "
        "hub re-scores runs up to that size (PRIME_HUB_VERIFY_MAX_SAMPLES)"
    )


@dataclass
class Pushed:
    """What the hub holds of a run's scored samples while it re-scores them: their scores
    only (`_KEPT`); the fields the sandbox needs went to a file as they streamed past."""

    records: list[dict[str, Any]]
    env_args: dict[str, Any] | None


_FIELDS = ("task_id", "example_index", "rollout_index", "prompt", "completion", "answer", "info",
           "stop_reason")  # fmt: skip
_KEPT = ("example_index", "rollout_index", "reward", "rewards", "metrics")


def _collect_samples(
    store: BlobStorage, batch_keys: Sequence[str], settings: HubSettings, out: Path
) -> Pushed:
    """Stream the run's batches, one record at a time: each scored record's task and
    completion fields are written to `out` (JSON lines, what the sandbox reads) and only its
    scores are kept. More than `verify_max_samples` scored records or `verify_max_sample_bytes`
    of them stops the read at once: nothing past the limit is read, let alone held."""
    limit = settings.verify_max_sample_bytes
    records: list[dict[str, Any]] = []
    env_args: dict[str, Any] | None = None
    written = 0
    with out.open("wb") as sink:
        for key in batch_keys:
            with store.open(key) as handle, gzip.GzipFile(fileobj=handle, mode="rb") as stream:
                while line := stream.readline(limit + 1):
                    if len(line) > limit:
                        raise NotVerifiable(_too_big(limit))
                    if not line.strip():
                        continue
                    record = decode_record(line)
                    if record.get("error") is not None or record.get("reward") is None:
                        continue
                    if len(records) == settings.verify_max_samples:
                        raise NotVerifiable(_too_many(len(records) + 1, settings))
                    if env_args is None and isinstance(record.get("env_args"), dict):
                        env_args = record["env_args"]
                    text = json.dumps({k: record.get(k) for k in _FIELDS}, ensure_ascii=False)
                    data = text.encode() + b"\n"
                    written += len(data)
                    if written > limit:
                        raise NotVerifiable(_too_big(limit))
                    sink.write(data)
                    records.append({k: record.get(k) for k in _KEPT})
    return Pushed(records, env_args)


def _too_big(limit: int) -> str:
    return (
        f"its scored samples are more than {limit} bytes; the hub re-scores runs up to that "
        "size (PRIME_HUB_VERIFY_MAX_SAMPLE_BYTES)"
    )


def _run_env_args(metadata_json: str) -> dict[str, Any]:
    """The arguments the run says it loaded its environment with, when its records do not."""
    try:
        stored = json.loads(metadata_json).get("env_args")
    except (ValueError, AttributeError):
        stored = None
    return stored if isinstance(stored, dict) else {}


class _Score(BaseModel):
    """One record's entry of `out.json` (prime_env.rescore)."""

    model_config = ConfigDict(extra="forbid")
    reward: float | None = None
    rewards: dict[str, float] = Field(default_factory=dict)
    metrics: dict[str, float] = Field(default_factory=dict)
    error: str | None = None
    mismatch: str | None = None


class _Rescored(BaseModel):
    model_config = ConfigDict(extra="forbid")
    weights: dict[str, float]
    scores: list[_Score]


def out_json_limit(records: Sequence[dict[str, Any]]) -> int:
    """The most bytes an honest `out.json` for `records` takes: per record, its score names
    (as pushed) with room for any float, and an error or mismatch message (500 characters,
    as prime_env.rescore cuts them); plus the rubric's weights. The environment's code could
    write anything there; the hub reads no more than this."""
    per_record = 0
    for record in records:
        names = [*(record.get("rewards") or {}), *(record.get("metrics") or {})]
        per_record += 2048 + sum(len(json.dumps(name)) + 40 for name in names)
    return 64 * 1024 + per_record


def parse_out_json(data: bytes) -> dict[str, Any]:
    """`out.json` as compare() reads it, or NotVerifiable: at most 8 levels deep, only the
    fields prime_env.rescore writes, every score a number."""
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        raise NotVerifiable("its re-scoring wrote an out.json that is not JSON") from None
    if nests_deeper_than(value, 8):
        raise NotVerifiable("its re-scoring wrote an out.json nested deeper than scores are")
    try:
        return _Rescored.model_validate(value).model_dump()
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise NotVerifiable(f"its re-scoring wrote an out.json that is not scores ({where}: "
                            f"{first['msg']})") from None  # fmt: skip


def _rescore_in_sandbox(
    settings: HubSettings, work: Path, wheels: Sequence[Path], spec: str, env_args: dict[str, Any],
    records: Sequence[dict[str, Any]], samples: Path, stopping: Stopping | None = None,
) -> dict[str, Any]:  # fmt: skip
    from sandbox import SandboxError, SandboxLimits, open_sandbox, resolve_backend

    limits = SandboxLimits(
        memory_mb=1536, workdir_mb=640, file_size_mb=256, transfer_bytes=_TRANSFER_BYTES,
        timeout_s=settings.verify_timeout_seconds,
    )  # fmt: skip
    try:
        # The rubric is anyone's code: never where it sees the hub's host, whatever
        # PRIME_SANDBOX_ALLOW_UNISOLATED lets `auto` fall back to.
        backend = resolve_backend(settings.verify_sandbox)
        if backend == "unisolated":
            raise NotVerifiable("no isolating sandbox (Docker or bubblewrap) is available")
        stopping = stopping or Stopping()
        with open_sandbox(backend, limits=limits) as box, stopping.watching(box):
            python = box.exec(
                ["python3", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], timeout=60
            )
            if python.exit_code != 0:
                raise NotVerifiable("the sandbox has no python3")
            site = work / "site"
            try:
                install(wheels, work, site, python.stdout.decode().strip(), settings)
            except InstallRefused as exc:
                raise NotVerifiable(f"the environment could not be installed: {exc}") from None
            stopping.check()
            box.upload_dir(site, "site")
            box.write_file("rescore/samples.jsonl", samples.read_bytes())
            request = {"env": spec, "env_args": env_args, "samples": "/work/rescore/samples.jsonl",
                       "out": "/work/rescore/out.json"}  # fmt: skip
            box.write_file("rescore/request.json", json.dumps(request))
            ran = box.exec(["python3", "-I", "-c", _RESCORE],
                           timeout=settings.verify_timeout_seconds)  # fmt: skip
            if ran.timed_out:
                raise NotVerifiable(
                    f"re-scoring took more than {settings.verify_timeout_seconds:g} s"
                )
            if ran.exit_code != 0:
                tail = (ran.stderr or ran.stdout).decode(errors="replace").strip().splitlines()[-3:]
                raise NotVerifiable("the environment could not be re-scored: " + " | ".join(tail))
            limit = out_json_limit(records)
            try:
                data = box.read_file("rescore/out.json", max_bytes=limit)
            except (SandboxError, OSError, ValueError):
                raise NotVerifiable(
                    f"its re-scoring wrote no out.json of at most {limit} bytes (what "
                    f"{len(records)} samples' scores take); the environment's code may have "
                    "replaced it"
                ) from None
            return parse_out_json(data)
    except SandboxError as exc:
        raise NotVerifiable(f"no sandbox to re-score in: {exc}") from None


# -- comparing ------------------------------------------------------------------------------


def _close(a: Any, b: Any) -> bool:
    if not isinstance(a, int | float) or not isinstance(b, int | float):
        return False
    return math.isclose(float(a), float(b), rel_tol=_TOLERANCE, abs_tol=_TOLERANCE)


def _same_scores(pushed: dict[str, Any], ours: dict[str, Any]) -> bool:
    if not _close(pushed.get("reward"), ours.get("reward")):
        return False
    for group in ("rewards", "metrics"):
        mine, theirs = ours.get(group) or {}, pushed.get(group) or {}
        if set(mine) != set(theirs) or not all(_close(theirs[k], mine[k]) for k in mine):
            return False
    return True


def compare(
    records: Sequence[dict[str, Any]], rescored: dict[str, Any], declared: RubricSpec | None
) -> tuple[VerificationStatus, str]:
    """The verdict on `records` (as pushed) against the hub's own scores of them."""
    scores = rescored.get("scores") or []
    if len(scores) != len(records):
        return VerificationStatus.FAILED, "the re-scoring answered for another number of samples"
    if declared is not None:
        weights = {name: float(w) for name, w in (rescored.get("weights") or {}).items()}
        said = {name: term.weight for name, term in declared.root.items()}
        if weights != said:
            return VerificationStatus.DISAGREED, (
                f"the environment's rubric weighs {weights}, but its version declares {said}"
            )
    foreign = [i for i, s in enumerate(scores) if s.get("mismatch")]
    unscored = [i for i, s in enumerate(scores) if s.get("error")]
    wrong = [
        i
        for i, s in enumerate(scores)
        if not s.get("error") and not s.get("mismatch") and not _same_scores(records[i], s)
    ]
    total = len(records)
    if not foreign and not unscored and not wrong:
        return VerificationStatus.VERIFIED, f"re-scored {total} samples: every score matches"
    parts = []
    if foreign:
        i = foreign[0]
        parts.append(
            f"{len(foreign)} of {total} samples are not the environment's own tasks (e.g. "
            f"example {records[i].get('example_index')}: {scores[i]['mismatch']})"
        )
    if wrong:
        i = wrong[0]
        parts.append(
            f"{len(wrong)} of {total} samples score differently (e.g. example "
            f"{records[i].get('example_index')}, rollout {records[i].get('rollout_index')}: "
            f"pushed reward {records[i].get('reward')}, re-scored {scores[i].get('reward')})"
        )
    if unscored:
        i = unscored[0]
        parts.append(
            f"{len(unscored)} could not be re-scored (e.g. example "
            f"{records[i].get('example_index')}: {scores[i]['error']})"
        )
    return VerificationStatus.DISAGREED, "; ".join(parts)


# -- the worker -----------------------------------------------------------------------------


async def run_worker(engine: Engine, store: BlobStorage, settings: HubSettings) -> None:
    """Claim and verify runs until cancelled, at most `verify_concurrency` at a time (each in a
    thread: installing and sandboxing block)."""
    import asyncio

    from starlette.concurrency import run_in_threadpool

    slots = asyncio.Semaphore(settings.verify_concurrency)
    running: set[asyncio.Task[None]] = set()
    stopping = Stopping()

    async def one(run_id: str) -> None:
        try:
            await run_in_threadpool(verify, engine, store, settings, run_id, stopping)
        finally:
            slots.release()

    try:
        while True:
            await slots.acquire()
            try:
                run_id = await run_in_threadpool(claim_next, engine, settings)
            except Exception:
                log.exception("verification worker could not claim a run")
                run_id = None
            if run_id is None:
                slots.release()
                await asyncio.sleep(settings.verify_poll_seconds)
                continue
            task = asyncio.create_task(one(run_id))
            running.add(task)
            task.add_done_callback(running.discard)
    finally:
        # A thread cannot be cancelled: stop its sandbox and wait for it to put its run back,
        # so nothing it started outlives the hub (its scratch directory included).
        stopping.stop()
        if running:
            await asyncio.wait(running, timeout=_STOP_GRACE_S)
