"""Text that is not Unicode (a lone surrogate, JSON's `"\\ud800"`) is a 400 naming the field, on
every JSON body, and nothing of it is stored (issue 37: a pushed sample's text and a
description PATCH answered 500, and the environment's next page load failed once). On SQLite
and PostgreSQL, whose drivers refuse such text differently."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.hub_server.hardening_hub import HardenedHub
from tests.hub_server.services import postgres_bin, postgres_cluster
from tests.support import require

API = "/api/v1/environmentshub"
EVALS = "/api/v1/evaluations"
LONE = "\ud800"


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def hub(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HardenedHub]:
    root = tmp_path_factory.mktemp("hub")
    if request.param == "sqlite":
        yield HardenedHub(root)
        return
    require(postgres_bin() is not None, "PostgreSQL (Debian package postgresql)")
    with postgres_cluster() as url:
        made = HardenedHub(root, database_url=url)
        try:
            yield made
        finally:
            made.engine.dispose()


def send(hub: HardenedHub, method: str, path: str, body: Any) -> tuple[int, str]:
    """`body` as JSON with ASCII escapes, as any client's encoder writes a lone surrogate."""
    with hub.client() as client:
        answer = client.request(
            method, path, content=json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {hub.tokens['alice']}",
                     "Content-Type": "application/json"},
        )  # fmt: skip
        return answer.status_code, answer.json().get("detail", "")


def test_a_description_patch_names_the_field_and_changes_nothing(hub: HardenedHub) -> None:
    status, detail = send(hub, "PATCH", f"{API}/alice/wordle", {"description": f"a{LONE}b"})
    assert status == 400 and detail.startswith("Invalid request: description holds a lone")
    status, detail = send(hub, "PATCH", f"{API}/alice/wordle", {"tags": ["ok", LONE]})
    assert status == 400 and "tags[1] holds a lone" in detail, detail
    with hub.client() as client:
        assert client.get("/alice/wordle").status_code == 200
        assert client.get(f"{API}/alice/wordle").status_code == 200


def test_a_pushed_sample_names_the_field_and_stores_nothing(hub: HardenedHub) -> None:
    status, created = 0, ""
    with hub.client() as client:
        answer = client.post(f"{EVALS}/", json={"name": "m", "model_name": "m",
                             "environments": [{"slug": "alice/wordle"}]},
                             headers={"Authorization": f"Bearer {hub.tokens['alice']}"})  # fmt: skip
        status, created = answer.status_code, answer.json()["data"]["id"]
    assert status == 200
    sample = {"example_index": 0, "rollout_index": 0, "reward": 1.0,
              "completion": [{"role": "assistant", "content": f"x{LONE}"}]}  # fmt: skip
    status, detail = send(hub, "POST", f"{EVALS}/{created}/samples", {"samples": [sample]})
    assert status == 400, detail
    assert "samples[0].completion[0].content holds a lone" in detail, detail
    status, detail = send(hub, "POST", f"{EVALS}/{created}/samples",
                          {"samples": [{**sample, "completion": [], "info": {LONE: 1}}]})  # fmt: skip
    assert status == 400 and "a key of samples[0].info" in detail, detail
    with hub.client() as client:
        run = client.get(f"{EVALS}/{created}",
                         headers={"Authorization": f"Bearer {hub.tokens['alice']}"}).json()  # fmt: skip
    assert run["data"]["sample_count"] == 0


@pytest.mark.parametrize(
    "method,path,body,field",
    [
        ("POST", f"{EVALS}/", {"name": LONE, "model_name": "m",
                               "environments": [{"slug": "alice/wordle"}]}, "name"),
        ("POST", f"{API}/resolve", {"name": "fresh", "description": LONE}, "description"),
        ("POST", f"{API}/alice/wordle/@0.1.0/yank", {"reason": LONE}, "reason"),
    ],
)  # fmt: skip
def test_every_json_body_names_the_field(
    hub: HardenedHub, method: str, path: str, body: dict[str, Any], field: str
) -> None:
    status, detail = send(hub, method, path, body)
    assert status == 400 and f"{field} holds a lone" in detail, (status, detail)


def test_every_route_that_binds_a_json_body_binds_a_request_body() -> None:
    """The rule holds for routes added later: each model-bound JSON body is a `RequestBody`
    (the evaluations API parses its bodies itself, with the same rule: `loads_strict`)."""
    from fastapi.routing import APIRoute
    from pydantic import BaseModel

    from hub_server.routes import ROUTERS
    from registry_index.schemas.request import RequestBody

    bound = []
    for router in ROUTERS:
        for route in router.routes:
            if not isinstance(route, APIRoute):
                continue
            for param in route.dependant.body_params:
                annotation = param.field_info.annotation
                for model in getattr(annotation, "__args__", (annotation,)):
                    if isinstance(model, type) and issubclass(model, BaseModel):
                        bound.append((route.path, model))
    assert len(bound) >= 5, bound  # the PATCH, resolve, two uploads, yank at least
    assert [(path, m.__name__) for path, m in bound if not issubclass(m, RequestBody)] == []
