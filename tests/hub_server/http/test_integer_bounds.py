"""Issue 26, class 8, every route: no integer a request carries can overflow a column or a
query. Each integer query parameter of every route declares a maximum no larger than what
the hub's columns store (`registry_index.bounds.MAX_STORED_INT`), and `2**63` sent to each
is a 4xx; so is every integer field of a request body a route declares."""

from __future__ import annotations

import re
import typing
from collections.abc import Iterator
from typing import Any

import pytest
from annotated_types import Le
from fastapi.testclient import TestClient
from pydantic import BaseModel

from registry_index.bounds import MAX_STORED_INT
from tests.hub_server.api_routes import api_routes
from tests.hub_server.hardening_hub import HardenedHub


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HardenedHub, TestClient]]:
    hub = HardenedHub(tmp_path_factory.mktemp("ints"))
    with hub.client() as client:
        yield hub, client


def _is_int(annotation: Any) -> bool:
    return annotation is int or int in typing.get_args(annotation)


def _maximum(field: Any) -> int | None:
    bounds = [m.le for m in field.metadata if isinstance(m, Le)]
    return min(bounds) if bounds else None


def params_of(dependant: Any, kind: str) -> list[Any]:
    """The route's parameters of `kind`, its dependencies' included."""
    found = list(getattr(dependant, kind))
    for inner in dependant.dependencies:
        found.extend(params_of(inner, kind))
    return found


def int_query_params(hub: HardenedHub) -> list[tuple[str, str, int | None]]:
    """(path, parameter alias, its maximum) of every integer query parameter of the app."""
    found = []
    for route in api_routes(hub.app.routes):
        for param in params_of(route.dependant, "query_params"):
            if _is_int(param.field_info.annotation):
                found.append((route.path, param.alias, _maximum(param.field_info)))
    return found


def int_body_fields(hub: HardenedHub) -> list[tuple[str, int | None]]:
    """(model.field, its maximum) of every integer field of every declared request body."""
    found: list[tuple[str, int | None]] = []
    seen: set[type] = set()

    def walk(model: type[BaseModel]) -> None:
        if model in seen:
            return
        seen.add(model)
        for name, field in model.model_fields.items():
            if _is_int(field.annotation):
                found.append((f"{model.__name__}.{name}", _maximum(field)))
            for inner in (field.annotation, *typing.get_args(field.annotation)):
                if isinstance(inner, type) and issubclass(inner, BaseModel):
                    walk(inner)

    for route in api_routes(hub.app.routes):
        for param in params_of(route.dependant, "body_params"):
            annotation = param.field_info.annotation
            if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                walk(annotation)
    return found


def test_every_integer_a_request_carries_is_bounded(hub: tuple[HardenedHub, TestClient]) -> None:
    hub_, _ = hub
    params = int_query_params(hub_)
    assert params, "no integer query parameter found"
    unbounded = [(p, a) for p, a, most in params if most is None or most > MAX_STORED_INT]
    assert not unbounded, unbounded
    fields = int_body_fields(hub_)
    assert fields, "no integer body field found"
    loose = [name for name, most in fields if most is None or most > MAX_STORED_INT]
    assert not loose, loose


def test_two_to_the_63_in_any_integer_query_parameter_is_a_4xx(
    hub: tuple[HardenedHub, TestClient],
) -> None:
    hub_, client = hub
    run = client.post(
        "/api/v1/evaluations/", headers={"Authorization": f"Bearer {hub_.tokens['alice']}"},
        json={"name": "r", "environments": [{"slug": "alice/wordle"}], "model_name": "m"},
    ).json()["data"]["id"]  # fmt: skip
    values = {"owner": "alice", "owner_name": "alice", "name": "wordle", "evaluation_id": run,
              "project": "wordle", "filename": "x.whl", "version": "0.1.0", "ref": "0.1.0"}  # fmt: skip
    failures = {}
    for path, alias, _most in int_query_params(hub_):
        url = re.sub(r"\{(\w+)(:\w+)?\}", lambda m: values.get(m.group(1), "x"), path)
        answer = client.get(url, params={alias: str(2**63)})
        if answer.status_code >= 500:
            failures[f"{url}?{alias}"] = answer.status_code
    assert not failures, failures
