"""Complete hub answers, built with the shared wire schemas, for the small fake servers of the
client's tests (retries, redirects): a fake that answered half a body would now be refused."""

from __future__ import annotations

from datetime import UTC, datetime

from registry_index.schemas.accounts import TokenOut, WhoAmI
from registry_index.schemas.envelope import Envelope, Page
from registry_index.schemas.evals import (
    BatchAccepted,
    EnvironmentLink,
    EvaluationEnvelope,
    EvaluationInfo,
)
from registry_index.schemas.versions import FileOut, VersionInfo

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def whoami(username: str = "x") -> bytes:
    who = WhoAmI(
        id="u1",
        username=username,
        is_admin=False,
        organizations=[],
        token=TokenOut(name="cli", scopes=["all"]),
    )
    return Envelope(data=who).model_dump_json().encode()


def evaluation(evaluation_id: str = "e1", status: str = "running") -> EvaluationInfo:
    return EvaluationInfo(
        id=evaluation_id,
        evaluation_id=evaluation_id,
        name="wordle--m",
        environment=EnvironmentLink(
            id="env1",
            slug="alice/wordle",
            owner="alice",
            name="wordle",
            version="0.1.0",
            version_id="v1",
        ),
        model_name="m",
        framework="prime",
        status=status,
        is_public=False,
        tags=[],
        metadata={},
        metrics={},
        summary=None,
        sample_count=0,
        user="x",
        created_at=NOW,
        updated_at=NOW,
        finalized_at=None,
    )


def created(evaluation_id: str = "e1") -> bytes:
    info = evaluation(evaluation_id)
    return EvaluationEnvelope(evaluation_id=evaluation_id, data=info).model_dump_json().encode()


def evaluation_page(*ids: str) -> bytes:
    page = Page(data=[evaluation(i) for i in ids], total_count=len(ids), page=1, per_page=20)
    return page.model_dump_json().encode()


def batch(evaluation_id: str = "e1", accepted: int = 1) -> bytes:
    done = BatchAccepted(evaluation_id=evaluation_id, accepted=accepted, batch=1, sample_count=1)
    return Envelope(data=done).model_dump_json().encode()


def version(number: str, content_hash: str, kinds: list[str]) -> VersionInfo:
    """A version of an environment as `GET …/versions` lists it, with a file of each kind."""
    files = [
        FileOut(
            filename=f"f.{kind}",
            kind=kind,
            sha256="ab" * 32,
            size=1,
            url=f"http://hub/f.{kind}",
            uploaded_at=NOW,
            downloads=0,
        )
        for kind in kinds
    ]
    return VersionInfo(
        id=f"v-{number}", semantic_version=number, content_hash=content_hash, yanked=False,
        yanked_reason=None, requires_python=None, created_at=NOW, downloads=0, files=files,
    )  # fmt: skip
