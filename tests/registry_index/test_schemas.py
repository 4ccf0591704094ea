"""The REST wire schemas (`registry_index.schemas`): what the hub sends, the CLI reads back as is.

The hub serialises each answer with one of these models and the CLI parses it with the same
model, then prints `model_dump(mode="json")` for `--output json`. The property: for every value a
response model can hold, JSON → model → JSON is the identity, so nothing is lost or reshaped on
the way (the hub's own route tests pin what it sends). Request models refuse what the hub refuses.
"""

from __future__ import annotations

import ast
import json
import types
import typing
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path
from typing import Any, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

import registry_index
from registry_index.bounds import MAX_ABS_SCORE
from registry_index.rubric_spec import RubricSpec, RubricTerm
from registry_index.schemas.accounts import WhoAmI
from registry_index.schemas.adapters import AdapterSummary, AdapterVersionInfo
from registry_index.schemas.envelope import Envelope, Page
from registry_index.schemas.environments import (
    MAX_TAG_LENGTH,
    EnvironmentDetail,
    EnvironmentPatch,
    EnvironmentSummary,
)
from registry_index.schemas.errors import ErrorBody
from registry_index.schemas.evals import (
    BatchAccepted,
    CreateEvaluation,
    EvaluationEnvelope,
    EvaluationInfo,
)
from registry_index.schemas.leaderboard import Leaderboard
from registry_index.schemas.push import (
    FinalizeResult,
    PushMetadata,
    PutResult,
    ResolveRequest,
    ResolveResponse,
    SourceReservation,
    UploadRequest,
    WheelReservation,
)
from registry_index.schemas.versions import InstallRecord, VersionInfo

# Every response model a route of the hub declares (tests/hub_server/registry/test_rest_api.py checks
# that the routes declare only models from registry_index.schemas).
RESPONSES: list[type[BaseModel]] = [
    Envelope[WhoAmI],
    Page[EnvironmentSummary],
    Envelope[EnvironmentDetail],
    Envelope[EnvironmentSummary],
    Envelope[list[VersionInfo]],
    Envelope[InstallRecord],
    Envelope[VersionInfo],
    Envelope[ResolveResponse],
    Envelope[WheelReservation],
    Envelope[SourceReservation],
    Envelope[PutResult],
    Envelope[FinalizeResult],
    EvaluationEnvelope,
    Envelope[EvaluationInfo],
    Envelope[BatchAccepted],
    Page[EvaluationInfo],
    Page[dict[str, Any]],
    Page[AdapterSummary],
    Envelope[AdapterSummary],
    Envelope[AdapterVersionInfo],
    Envelope[list[AdapterVersionInfo]],
    Leaderboard,
    ErrorBody,
]

# JSON has no NaN or infinity (pydantic writes them as null), and the hub refuses them in what
# it is sent, so the floats it answers with are finite.
FLOATS = st.floats(allow_nan=False, allow_infinity=False)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | FLOATS | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
TIMESTAMPS = st.datetimes(
    min_value=datetime(1970, 1, 2), max_value=datetime(9999, 1, 1), timezones=st.just(UTC)
) | st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(9999, 1, 1))


# A declared rubric's validators refuse what field-by-field values would mostly be (a range
# low > high, no weighted function), so it is drawn from the declarations it accepts.
_SCORES = st.floats(-MAX_ABS_SCORE, MAX_ABS_SCORE, allow_nan=False)
RUBRICS = (
    st.dictionaries(
        st.text(min_size=1, max_size=12),
        st.builds(
            RubricTerm,
            weight=st.floats(-1e6, 1e6, allow_nan=False),
            range=st.tuples(_SCORES, _SCORES).map(lambda ends: tuple(sorted(ends))),
        ),
        min_size=1,
        max_size=3,
    )
    .filter(lambda terms: any(term.weight for term in terms.values()))
    .map(RubricSpec)
)


def wire(annotation: Any) -> st.SearchStrategy[Any]:
    """Values of `annotation` as a hub could send them, built field by field from the models."""
    if annotation is RubricSpec:
        return RUBRICS
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        fields = {name: wire(info.annotation) for name, info in annotation.model_fields.items()}
        return st.builds(annotation, **fields)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return st.one_of(*(wire(arg) for arg in args))
    if origin is Literal:
        return st.sampled_from(args)
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return st.sampled_from(list(annotation))
    if origin is list:
        return st.lists(wire(args[0]), max_size=3)
    if origin is dict:
        return st.dictionaries(wire(args[0]), wire(args[1]), max_size=3)
    if origin is tuple:
        return st.tuples(*(wire(arg) for arg in args))
    if origin is typing.Annotated:
        return wire(args[0])
    simple: dict[Any, st.SearchStrategy[Any]] = {
        str: st.text(max_size=12),
        int: st.integers(-(2**53), 2**53),
        float: FLOATS,
        bool: st.booleans(),
        datetime: TIMESTAMPS,
        type(None): st.none(),
        Any: JSON_VALUES,
    }
    return simple[annotation]


@pytest.mark.parametrize("model", RESPONSES, ids=lambda m: m.__name__)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_answers_round_trip_unchanged(model: type[BaseModel], data: st.DataObject) -> None:
    sent = json.loads(data.draw(wire(model)).model_dump_json())  # what the hub writes
    read = model.model_validate(sent)  # what the CLI parses
    assert read.model_dump(mode="json") == sent  # what `--output json` prints
    assert model.model_validate_json(json.dumps(sent)) == read


def test_an_answer_missing_a_field_is_refused() -> None:
    with pytest.raises(ValidationError, match="username"):
        Envelope[WhoAmI].model_validate({"data": {"id": "u1"}})
    with pytest.raises(ValidationError):
        Page[EnvironmentSummary].model_validate({"data": "not a list"})


def test_an_answer_with_fields_from_a_newer_hub_is_read() -> None:
    who = {
        "id": "u1",
        "username": "alice",
        "is_admin": False,
        "organizations": ["acme"],
        "token": {"name": "cli", "scopes": ["all"], "expires_at": None},
        "avatar": "new in a later hub",
    }
    assert Envelope[WhoAmI].model_validate({"data": who}).data.token.scopes == ["all"]


def test_requests_refuse_what_the_hub_refuses() -> None:
    too_long = "t" * (MAX_TAG_LENGTH + 1)
    for bad in (
        lambda: ResolveRequest(name=""),
        lambda: ResolveRequest(name="x", tags=[too_long]),
        lambda: ResolveRequest(name="x", tags=["t"] * 33),
        lambda: UploadRequest(filename="f.whl", sha256="ABC", semantic_version="1"),
        lambda: PushMetadata(reward_range=(1.0, 0.0)),
        lambda: CreateEvaluation(name="n", model_name="m"),  # no environment
        lambda: EnvironmentPatch.model_validate({"visibility": "secret"}),
    ):
        with pytest.raises(ValidationError):
            bad()
    assert ResolveRequest.model_validate({"name": "x", "visibility": "PRIVATE"}).visibility == (
        "private"
    )


def test_a_request_sends_only_the_fields_set() -> None:
    body = UploadRequest(filename="f.whl", sha256="ab" * 32, semantic_version="1.0")
    assert body.model_dump(mode="json", exclude_unset=True) == {
        "filename": "f.whl",
        "sha256": "ab" * 32,
        "semantic_version": "1.0",
    }


def test_registry_index_imports_nothing_above_it() -> None:
    """registry_index sits below the SDK, the CLI and the hub: its schemas import none of them."""
    root = Path(registry_index.__file__).parent
    above = ("hub_server", "prime_cli", "prime_env", "trainer_bridge", "sandbox", "fastapi")
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            for name in names:
                assert name.split(".")[0] not in above, f"{path} imports {name}"
