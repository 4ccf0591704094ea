"""The REST API: the `prime env push` protocol, reads, search, yank, privacy and tokens.

Route logic, so the hub runs in-process (tests/hub_server/inproc.py); pip, uv and twine against
a real server are in test_clients.py."""

from __future__ import annotations

import hashlib
import io
import tarfile
import typing
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from hub_client.client import HubClient
from tests.hub_server.api_routes import api_routes
from tests.hub_server.hubproc import HubProcess
from tests.hub_server.inproc import InProcessHub
from tests.hub_server.wheels import source_archive_bytes, wheel_bytes

API = "/api/v1/environmentshub"


@pytest.fixture(scope="module")
def hub(inproc_hub: InProcessHub) -> InProcessHub:
    return inproc_hub


@pytest.fixture
def fresh_hub(fresh_inproc_hub: InProcessHub) -> InProcessHub:
    return fresh_inproc_hub


def client(hub: InProcessHub | HubProcess, token: str | None) -> Any:
    """A client of `hub` with `token`: in-process, or over a socket to a real server."""
    if isinstance(hub, InProcessHub):
        return hub.client(token)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=hub.url, headers=headers, timeout=30)


def push(
    api: Any, name: str, version: str, *, visibility: str = "public",
    owner: str | None = None, content_hash: str | None = None, source: bool = True,
    module: str = "VALUE = 1\n", tags: list[str] | None = None,
) -> dict:  # type: ignore[type-arg]  # fmt: skip
    """What `prime env push` does: resolve, then wheel and source via upload URLs."""
    body = {"name": name, "visibility": visibility, "owner_slug": owner}
    env = api.post(f"{API}/resolve", json=body)
    assert env.status_code == 200, env.text
    env_id = env.json()["data"]["id"]
    content_hash = content_hash or hashlib.sha256(f"{name}{version}{module}".encode()).hexdigest()
    wheel = wheel_bytes(name, version, module_source=module)
    filename = f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    meta = {"description": f"{name} description", "tags": tags or ["test"]}
    result = _upload(
        api, f"{API}/{env_id}/wheels", "wheel_id", wheel,
        {"content_hash": content_hash, "filename": filename, "semantic_version": version,
         "size": len(wheel), "metadata": meta},
    )  # fmt: skip
    if source:
        archive = source_archive_bytes(
            {"pyproject.toml": b"[project]\n", f"{name}.py": module.encode()}
        )
        result = _upload(
            api, f"{API}/{env_id}/versions", "version_id", archive,
            {"content_hash": content_hash, "filename": f"{name}-{version}-{content_hash[:8]}.tar.gz",
             "semantic_version": version},
        )  # fmt: skip
    return {"env_id": env_id, "content_hash": content_hash, **result}


def _upload(api: Any, url: str, id_key: str, content: bytes, body: dict[str, Any]) -> Any:
    """Reserve an upload at `url`, put `content` at the URL it gives, finalize: its data."""
    reserved = api.post(url, json={**body, "sha256": hashlib.sha256(content).hexdigest()})
    assert reserved.status_code == 200, reserved.text
    data = reserved.json()["data"]
    assert api.put(data["upload_url"], content=content).status_code == 200
    done = api.post(f"{url}/{data[id_key]}/finalize")
    assert done.status_code == 200, done.text
    return done.json()["data"]


def test_push_protocol_and_install_record(hub: InProcessHub) -> None:
    token = hub.add_user("pam")
    api = client(hub, token)
    pushed = push(api, "wordle", "0.1.0")
    assert pushed["success"] is True
    assert {f["kind"] for f in pushed["version"]["files"]} == {"wheel", "source"}

    again = api.post(f"{API}/resolve", json={"name": "Wordle"})
    assert again.json()["data"] == {
        "id": pushed["env_id"], "owner": {"name": "pam", "kind": "user"}, "name": "wordle",
        "visibility": "public", "created": False,
    }  # fmt: skip

    record = hub.http.get(f"{hub.url}{API}/pam/wordle/@latest").json()["data"]
    assert record["semantic_version"] == "0.1.0"
    assert record["simple_index_url"] == f"{hub.url}/pam/simple/"
    wheel = hub.http.get(record["wheel_url"])
    assert (
        wheel.status_code == 200
        and hashlib.sha256(wheel.content).hexdigest() == record["wheel_sha256"]
    )
    source = hub.http.get(record["source_url"])
    with tarfile.open(fileobj=io.BytesIO(source.content), mode="r:gz") as archive:
        assert sorted(archive.getnames()) == ["pyproject.toml", "wordle.py"]

    # Unchanged content is refused with the message the prime CLI recognises: under a new
    # version number, and as the stock CLI re-pushes an unchanged version.
    for version in ("0.1.1", "0.1.0"):
        built = wheel_bytes("wordle", version)
        refused = api.post(
            f"{API}/{pushed['env_id']}/wheels",
            json={"content_hash": pushed["content_hash"], "semantic_version": version,
                  "filename": f"wordle-{version}-py3-none-any.whl",
                  "sha256": hashlib.sha256(built).hexdigest()},
        )  # fmt: skip
        assert refused.status_code == 409, refused.text
        assert "already exists with the same content" in refused.json()["detail"]

    push(api, "wordle", "0.2.0", module="VALUE = 2\n")
    versions = hub.http.get(f"{hub.url}{API}/pam/wordle/versions").json()["data"]
    assert [v["semantic_version"] for v in versions] == ["0.2.0", "0.1.0"]
    pinned = hub.http.get(f"{hub.url}{API}/pam/wordle/@%3C0.2").json()["data"]
    assert pinned["semantic_version"] == "0.1.0"
    missing = hub.http.get(f"{hub.url}{API}/pam/wordle/@9.9")
    assert missing.status_code == 404 and "0.1.0, 0.2.0" in missing.json()["detail"]


def test_yank_shows_in_index_and_latest(hub: InProcessHub) -> None:
    api = client(hub, hub.add_user("yara"))
    push(api, "yankee", "1.0.0", source=False)
    push(api, "yankee", "1.1.0", source=False, module="VALUE = 3\n")
    yanked = api.post(f"{API}/yara/yankee/@1.1.0/yank", json={"reason": "broken scorer"})
    assert yanked.status_code == 200 and yanked.json()["data"]["yanked"] is True
    assert (
        hub.http.get(f"{hub.url}{API}/yara/yankee/@latest").json()["data"]["semantic_version"]
        == "1.0.0"
    )
    assert hub.http.get(f"{hub.url}{API}/yara/yankee/@1.1.0").json()["data"]["yanked"] is True
    page = hub.http.get(
        f"{hub.url}/yara/simple/yankee/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    ).json()
    states = {f["filename"]: f["yanked"] for f in page["files"]}
    assert states == {
        "yankee-1.0.0-py3-none-any.whl": False,
        "yankee-1.1.0-py3-none-any.whl": "broken scorer",
    }
    html = hub.http.get(f"{hub.url}/yara/simple/yankee/").text
    assert 'data-yanked="broken scorer"' in html
    assert api.post(f"{API}/yara/yankee/@1.1.0/unyank").json()["data"]["yanked"] is False
    assert (
        hub.http.get(f"{hub.url}{API}/yara/yankee/@latest").json()["data"]["semantic_version"]
        == "1.1.0"
    )
    # Others may not yank.
    other = client(hub, hub.add_user("yves"))
    assert other.post(f"{API}/yara/yankee/@1.0.0/yank").status_code == 403


def test_list_search_tags_sort_and_paging(hub: InProcessHub) -> None:
    api = client(hub, hub.add_user("lena"))
    for index, (name, tags) in enumerate([("alpha-env", ["math"]), ("beta-env", ["math", "games"]),
                                          ("gamma-env", ["games"])]):  # fmt: skip
        push(api, name, "1.0.0", tags=tags, source=False, module=f"V = {index}\n")
    listing = hub.http.get(f"{hub.url}{API}/", params={"owner": "lena", "sort": "name"}).json()
    assert [e["name"] for e in listing["data"]] == ["alpha-env", "beta-env", "gamma-env"]
    assert listing["total_count"] == 3
    tagged = hub.http.get(
        f"{hub.url}{API}/", params={"owner": "lena", "tag": ["math", "games"]}
    ).json()
    assert [e["name"] for e in tagged["data"]] == ["beta-env"]
    found = hub.http.get(f"{hub.url}{API}/", params={"search": "GAMMA"}).json()
    assert [e["name"] for e in found["data"]] == ["gamma-env"]
    page2 = hub.http.get(
        f"{hub.url}{API}/", params={"owner": "lena", "sort": "name", "per_page": 2, "page": 2}
    ).json()
    assert [e["name"] for e in page2["data"]] == ["gamma-env"] and page2["total_count"] == 3
    bad = hub.http.get(f"{hub.url}{API}/", params={"per_page": 1000})
    assert bad.status_code == 400 and "per_page" in bad.json()["detail"]


def test_private_environment_is_404_for_everyone_else(hub: InProcessHub) -> None:
    owner_token = hub.add_user("priya")
    api = client(hub, owner_token)
    push(api, "secret-env", "1.0.0", visibility="private")
    wheel = "secret_env-1.0.0-py3-none-any.whl"
    routes = [
        "/priya/simple/secret-env/",
        f"/priya/files/secret-env/{wheel}",
        f"/priya/files/secret-env/{wheel}.metadata",
        f"{API}/priya/secret-env",
        f"{API}/priya/secret-env/versions",
        f"{API}/priya/secret-env/@latest",
        f"{API}/priya/secret-env/@1.0.0",
        f"{API}/priya/secret-env/@1.0.0/source",
    ]
    outsider = hub.add_user("oscar")
    for who in (None, outsider):
        other = client(hub, who)
        for route in routes:
            assert other.get(route).status_code == 404, (who, route)
        assert other.head(f"/priya/files/secret-env/{wheel}").status_code == 404
        assert "secret-env" not in other.get("/priya/simple/").text
        assert all(
            e["name"] != "secret-env"
            for e in other.get(f"{API}/", params={"owner": "priya"}).json()["data"]
        )
        assert other.post(f"{API}/priya/secret-env/@1.0.0/yank").status_code in (401, 404)
        assert other.patch(
            f"{API}/priya/secret-env", json={"visibility": "public"}
        ).status_code in (401, 404)
    resolve = client(hub, outsider).post(
        f"{API}/resolve", json={"name": "secret-env", "owner_slug": "priya"}
    )
    assert resolve.status_code == 404
    # The owner sees everything, also through pip-style basic auth on the index.
    for route in routes:
        assert api.get(route).status_code == 200, route
    basic = hub.http.get(f"{hub.url}/priya/simple/secret-env/", auth=("__token__", owner_token))
    assert basic.status_code == 200 and wheel in basic.text


def test_token_scopes_and_organisations(hub: InProcessHub) -> None:
    hub.add_user("sam")
    hub.add_user("sue")
    from hub_server.admin import add_members, create_org, open_database

    engine = open_database(hub.settings)
    create_org(engine, "labteam", ["sam"])
    add_members(engine, "labteam", ["sue"])
    engine.dispose()
    one_env = client(hub, hub.token_for("sam", ["upload:labteam/only-this"]))
    assert (
        one_env.post(
            f"{API}/resolve", json={"name": "only-this", "owner_slug": "labteam"}
        ).status_code
        == 200
    )
    # Refused; 404 where the hub answers a name outside the token's reach like a private one.
    assert one_env.post(
        f"{API}/resolve", json={"name": "other", "owner_slug": "labteam"}
    ).status_code in (403, 404)
    assert one_env.post(f"{API}/resolve", json={"name": "mine"}).status_code in (403, 404)
    read_only = client(hub, hub.token_for("sue", ["read"]))
    assert (
        read_only.post(f"{API}/resolve", json={"name": "x", "owner_slug": "labteam"}).status_code
        == 403
    )
    whoami = read_only.get("/api/v1/user/whoami").json()["data"]
    assert whoami["username"] == "sue" and whoami["organizations"] == ["labteam"]
    assert whoami["token"]["scopes"] == ["read"]
    org_push = client(hub, hub.token_for("sue", ["upload:labteam"]))
    push(org_push, "lab-env", "1.0.0", owner="labteam", visibility="private", source=False)
    assert read_only.get(f"{API}/labteam/lab-env").status_code == 200
    outsider = client(hub, hub.add_user("tom"))
    assert outsider.get(f"{API}/labteam/lab-env").status_code == 404


def test_bad_tokens_are_401_then_rate_limited(fresh_hub: InProcessHub) -> None:
    bad = fresh_hub.http.get(
        f"{fresh_hub.url}/api/v1/user/whoami", headers={"Authorization": "Bearer phub_nope"}
    )
    assert bad.status_code == 401 and "token" in bad.json()["detail"]
    codes = [
        fresh_hub.http.get(
            f"{fresh_hub.url}{API}/", headers={"Authorization": "Bearer phub_wrong"}
        ).status_code
        for _ in range(25)
    ]
    assert codes[:19] == [401] * 19 and codes[-1] == 429
    limited = fresh_hub.http.get(
        f"{fresh_hub.url}{API}/", headers={"Authorization": "Bearer phub_wrong"}
    )
    assert int(limited.headers["retry-after"]) > 0


@pytest.mark.parametrize(
    ("accept", "status", "content_type"),
    [
        ("application/vnd.pypi.simple.v1+json", 200, "application/vnd.pypi.simple.v1+json"),
        ("application/vnd.pypi.simple.latest+json", 200, "application/vnd.pypi.simple.v1+json"),
        ("text/html", 200, "text/html"),
        ("application/xml", 406, None),
    ],
)
def test_simple_index_negotiation_head_and_range(
    hub: InProcessHub, accept: str, status: int, content_type: str | None
) -> None:
    api = client(hub, hub.admin_token)
    if hub.http.get(f"{hub.url}/admin/simple/neg-env/").status_code != 200:
        push(api, "neg-env", "1.0.0", source=False)
    page = hub.http.get(f"{hub.url}/admin/simple/neg-env/", headers={"Accept": accept})
    assert page.status_code == status
    assert page.headers["vary"] == "Accept"
    if content_type:
        assert page.headers["content-type"].startswith(content_type)
    wheel_url = f"{hub.url}/admin/files/neg-env/neg_env-1.0.0-py3-none-any.whl"
    full = hub.http.get(wheel_url)
    head = hub.http.head(wheel_url)
    assert head.status_code == 200 and int(head.headers["content-length"]) == len(full.content)
    assert head.headers["accept-ranges"] == "bytes"
    part = hub.http.get(wheel_url, headers={"Range": "bytes=-100"})
    assert part.status_code == 206 and part.content == full.content[-100:]
    metadata = hub.http.get(wheel_url + ".metadata")
    assert metadata.status_code == 200 and b"Name: neg-env" in metadata.content
    assert (
        hub.http.get(f"{hub.url}/admin/simple/Neg_Env/", follow_redirects=False).status_code == 301
    )


def test_stdlib_and_confusable_names_are_refused(hub: InProcessHub) -> None:
    api = client(hub, hub.add_user("nina"))
    push(api, "wordle-game", "1.0.0", source=False)
    for name, expected in [("json", "standard-library"), ("w0rdle_game", "too similar"),
                           ("WordleGame", "too similar")]:  # fmt: skip
        refused = api.post(f"{API}/resolve", json={"name": name})
        assert refused.status_code == 400, refused.text
        assert expected in refused.json()["detail"]
    names = [
        e["name"] for e in hub.http.get(f"{hub.url}{API}/", params={"owner": "nina"}).json()["data"]
    ]
    assert names == ["wordle-game"]


def test_the_clis_hub_client_runs_against_the_app_in_process(hub: InProcessHub) -> None:
    """`HubClient(transport=hub.transport)`: the CLI's typed client, no socket in between."""
    token = hub.add_user("cleo")
    push(client(hub, token), "cli-env", "1.0.0", source=False)
    with HubClient(hub.url, token, transport=hub.transport) as cli:
        assert cli.whoami().username == "cleo"
        assert cli.version("cleo", "cli-env", None).semantic_version == "1.0.0"
        assert [v.semantic_version for v in cli.versions("cleo", "cli-env")] == ["1.0.0"]


def _models(annotation: Any, seen: set[type[BaseModel]]) -> Iterator[type[BaseModel]]:
    """Every pydantic model in `annotation`: itself, its generic arguments, its fields' types."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        generic = annotation.__pydantic_generic_metadata__
        if generic["origin"]:  # Envelope[X]: made where it is written; Envelope and X count
            for inner in (generic["origin"], *generic["args"]):
                yield from _models(inner, seen)
            return
        if annotation in seen:
            return
        seen.add(annotation)
        yield annotation
        for field in annotation.model_fields.values():
            yield from _models(field.annotation, seen)
        return
    for inner in typing.get_args(annotation):
        yield from _models(inner, seen)


def test_api_routes_speak_only_the_shared_wire_schemas(hub: InProcessHub) -> None:
    """One definition per wire shape: every REST route's request body and answer is a model from
    `registry_index.schemas` (or the shared `summary` and `rubric_spec` models; the CLI's client
    parses them all), none defined in hub_server."""
    routes = [r for r in api_routes(hub.http.app.routes) if r.path.startswith("/api/v1")]
    seen: set[type[BaseModel]] = set()
    for route in routes:
        declared = [route.response_model]
        if route.body_field is not None:
            declared.append(route.body_field.field_info.annotation)
        for model in (m for d in declared for m in _models(d, seen)):
            assert model.__module__.startswith(
                ("registry_index.schemas.", "registry_index.summary", "registry_index.rubric_spec")
            ), f"{route.path} declares {model.__module__}.{model.__name__}"
    names = {model.__name__ for model in seen}
    assert {"Envelope", "Page", "WhoAmI", "EnvironmentDetail", "InstallRecord", "ResolveRequest",
            "UploadRequest", "FinalizeResult", "EvaluationEnvelope", "EvaluationInfo", "Summary",
            "BatchAccepted", "Leaderboard"} <= names  # fmt: skip
