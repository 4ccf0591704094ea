"""The typed hub client against the hub in-process: one method per endpoint, each answer parsed
with the shared wire schema and equal to the JSON the hub sent; `--output json` prints that JSON
unchanged; an answer of another shape is one clear error, never a traceback."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from pydantic import BaseModel

from hub_client.client import HubClient, HubError, NotFound, checked_request
from hub_client.install import resolve
from prime_cli.main import cli
from registry_index.resolve import parse_env_ref
from registry_index.schemas.evals import CreateEvaluation, EnvironmentRef
from registry_index.schemas.push import PushMetadata, ResolveRequest, UploadRequest
from tests.hub_server.evals.test_evaluations import rollout
from tests.hub_server.inproc import InProcessHub
from tests.hub_server.registry.test_rest_api import push
from tests.hub_server.wheels import source_archive_bytes, wheel_bytes


class Recorder(httpx.BaseTransport):
    """Passes requests to the hub and keeps the JSON of each API answer, as the hub sent it."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner = inner
        self.answers: list[Any] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if request.url.path.startswith("/api/v1") and response.content.startswith(b"{"):
            self.answers.append(json.loads(response.content))
        return response

    def last(self) -> Any:
        return self.answers[-1]


def _same(parsed: BaseModel | list[BaseModel], sent: Any) -> None:
    """What the client returns is exactly what the hub sent: no field lost, renamed or reshaped."""
    dumped = (
        [item.model_dump(mode="json") for item in parsed]
        if isinstance(parsed, list)
        else parsed.model_dump(mode="json")
    )
    assert dumped == sent


def _file(tmp_path: Path, name: str, data: bytes) -> tuple[Path, str]:
    path = tmp_path / name
    path.write_bytes(data)
    return path, hashlib.sha256(data).hexdigest()


def test_every_endpoint_answers_with_its_model(inproc_hub: InProcessHub, tmp_path: Path) -> None:
    token = inproc_hub.add_user("tyra")
    rec = Recorder(inproc_hub.transport)
    with HubClient(inproc_hub.url, token, transport=rec) as client:
        who = client.whoami()
        _same(who, rec.last()["data"])
        assert who.username == "tyra" and who.token.scopes

        resolved = client.resolve_environment(ResolveRequest(name="typed-env", tags=["t"]))
        _same(resolved, rec.last()["data"])
        assert resolved.created and resolved.owner.name == "tyra"

        content_hash = "cd" * 32
        meta = PushMetadata(description="typed", tags=["t"])
        wheel, wheel_sha = _file(
            tmp_path, "typed_env-0.1.0-py3-none-any.whl", wheel_bytes("typed-env", "0.1.0")
        )
        body = UploadRequest(
            content_hash=content_hash, filename=wheel.name, sha256=wheel_sha,
            size=wheel.stat().st_size, semantic_version="0.1.0", metadata=meta,
        )  # fmt: skip
        reserved = client.reserve_wheel(resolved.id, body)
        _same(reserved, rec.last()["data"])
        client.upload(reserved.upload_url, wheel)
        done = client.finalize_wheel(resolved.id, reserved.wheel_id, wheel.name)
        _same(done, rec.last()["data"])
        assert done.success and [f.kind for f in done.version.files] == ["wheel"]

        archive, archive_sha = _file(
            tmp_path, "typed-env-0.1.0.tar.gz", source_archive_bytes({"pyproject.toml": b"x"})
        )
        body = UploadRequest(
            content_hash=content_hash, filename=archive.name, sha256=archive_sha,
            semantic_version="0.1.0",
        )  # fmt: skip
        source = client.reserve_source(resolved.id, body)
        _same(source, rec.last()["data"])
        client.upload(source.upload_url, archive)
        done = client.finalize_source(resolved.id, source.version_id, archive.name)
        assert sorted(f.kind for f in done.version.files) == ["source", "wheel"]

        listing = client.list_environments(owner="tyra", tags=["t"], sort="name")
        _same(listing, rec.last())
        assert [(e.owner.name, e.name) for e in listing.data] == [("tyra", "typed-env")]
        detail = client.environment("tyra", "typed-env")
        _same(detail, rec.last()["data"])
        assert detail.versions_count == 1 and detail.latest_version == "0.1.0"
        record = client.version("tyra", "typed-env", None)
        _same(record, rec.last()["data"])
        assert record.wheel_filename == wheel.name and record.wheel_sha256 == wheel_sha
        versions = client.versions("tyra", "typed-env")
        _same(versions, rec.last()["data"])
        yanked = client.set_yanked("tyra", "typed-env", "0.1.0", True, "broken")
        _same(yanked, rec.last()["data"])
        assert yanked.yanked and yanked.yanked_reason == "broken"
        assert not client.set_yanked("tyra", "typed-env", "0.1.0", False).yanked

        installable = resolve(client, parse_env_ref("tyra/typed-env@0.1.0"))
        assert (installable.version, installable.wheel_sha256) == ("0.1.0", wheel_sha)
        with pytest.raises(NotFound, match="nothing was installed"):
            resolve(client, parse_env_ref("tyra/no-such-env"))

        run = CreateEvaluation(
            name="typed", model_name="m", environments=[EnvironmentRef(slug="tyra/typed-env")],
            client_run_id="typed-0",
        )  # fmt: skip
        created = client.create_evaluation(run)
        _same(created, rec.last()["data"])
        assert rec.last()["evaluation_id"] == created.id and created.environment.version == "0.1.0"
        assert client.create_evaluation(run).id == created.id  # the same client_run_id
        accepted = client.push_samples(created.id, [rollout(i) for i in range(3)])
        _same(accepted, rec.last()["data"])
        assert accepted.accepted == 3
        final = client.finalize_evaluation(created.id, {"avg_reward": 1.0})
        _same(final, rec.last()["data"])
        assert final.status == "completed" and final.summary and final.summary.rollouts == 3
        assert client.finalize_evaluation(created.id, {}).id == created.id  # already closed
        runs = client.list_evaluations(env="tyra/typed-env", model="m")
        _same(runs, rec.last())
        assert [r.id for r in runs.data] == [created.id]
        _same(client.evaluation(created.id), rec.last()["data"])
        samples = client.evaluation_samples(created.id, 1, 2)
        _same(samples, rec.last())
        assert (len(samples.data), samples.total_count) == (2, 3)


ANSWERS: list[tuple[Callable[[HubClient], object], Any, str]] = [
    (lambda c: c.whoami(), {"data": {"id": "u1"}}, "whoami: unexpected answer"),
    (lambda c: c.whoami(), {"data": None}, "data: "),
    (lambda c: c.list_environments(), [], "list environments: unexpected answer"),
    (lambda c: c.list_environments(), {"data": [{"name": "x"}], "total_count": 1}, "data.0."),
    (lambda c: c.versions("a", "b"), {"data": [{"semantic_version": 1}]}, "versions of a/b"),
    (lambda c: c.evaluation("e1"), {"detail": "hello"}, "evaluation e1: unexpected answer"),
    (lambda c: c.evaluation_samples("e1", 1, 5), {"data": "x"}, "samples of e1"),
    (lambda c: c.push_samples("e1", []), None, "push samples: unexpected answer"),
]


@pytest.mark.parametrize(("call", "answer", "expected"), ANSWERS)
def test_an_answer_of_another_shape_is_one_clear_error(
    call: Callable[[HubClient], object], answer: Any, expected: str
) -> None:
    content = b"" if answer is None else json.dumps(answer).encode()
    transport = httpx.MockTransport(lambda _request: httpx.Response(200, content=content))
    with (
        HubClient("http://hub.test", transport=transport) as client,
        pytest.raises(HubError) as caught,
    ):
        call(client)
    message = str(caught.value)
    assert expected in message and "http://hub.test" in message and "\n" not in message
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


@pytest.fixture(scope="module")
def ursa(inproc_hub: InProcessHub) -> str:
    """The token of user `ursa`, who runs the `prime` commands below."""
    return inproc_hub.add_user("ursa")


@pytest.fixture
def prime(
    inproc_hub: InProcessHub, ursa: str, monkeypatch: pytest.MonkeyPatch
) -> Callable[..., Any]:
    """Run `prime ARGS… --output json` against the in-process hub as user `ursa`."""
    monkeypatch.setenv("PRIME_HUB_URL", inproc_hub.url)
    monkeypatch.setenv("PRIME_API_KEY", ursa)
    in_process = functools.partialmethod(HubClient.__init__, transport=inproc_hub.transport)
    monkeypatch.setattr(HubClient, "__init__", in_process)

    def run(*args: str) -> Any:
        result = CliRunner().invoke(cli, [*args, "--output", "json"])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    return run


def test_json_output_is_the_hubs_json(
    inproc_hub: InProcessHub, ursa: str, prime: Callable[..., Any]
) -> None:
    api = inproc_hub.client(ursa)
    push(api, "cli-json", "0.1.0", tags=["json"])
    base = "/api/v1/environmentshub/ursa/cli-json"
    assert prime("env", "info", "ursa/cli-json") == {
        "environment": api.get(base).json()["data"],
        "version": api.get(f"{base}/@latest").json()["data"],
    }
    assert (
        prime("env", "versions", "ursa/cli-json")["versions"]
        == (api.get(f"{base}/versions").json()["data"])
    )
    assert prime("whoami") == {
        "hub_url": inproc_hub.url,
        **api.get("/api/v1/user/whoami").json()["data"],
    }
    [listed] = prime("env", "list", "--owner", "ursa")["environments"]
    [sent] = api.get("/api/v1/environmentshub/", params={"owner": "ursa"}).json()["data"]
    assert listed["environment"] == "ursa/cli-json" and listed["version"] == "0.1.0"
    assert (listed["updated_at"], listed["created_at"]) == (sent["updated_at"], sent["created_at"])
    status = prime("env", "status", "ursa/cli-json")
    assert status["visibility"] == "PUBLIC"
    assert (
        status["latest_version"]["created_at"]
        == api.get(f"{base}/@latest").json()["data"]["created_at"]
    )
    listing = prime("eval", "list", "--env", "ursa/cli-json")
    sent = api.get("/api/v1/evaluations/", params={"env": "ursa/cli-json"}).json()
    assert listing == {**sent, "total": sent["total_count"], "offset": 0}


def test_a_foreign_answer_is_an_error_line_not_a_traceback(
    prime: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    foreign = httpx.MockTransport(lambda _r: httpx.Response(200, json={"data": {"id": 1}}))
    monkeypatch.setattr(
        HubClient, "__init__", functools.partialmethod(HubClient.__init__, transport=foreign)
    )
    result = CliRunner().invoke(cli, ["env", "info", "ursa/x"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "Error: info ursa/x: unexpected answer from" in result.output


def test_a_request_the_hub_would_refuse_is_one_line_before_sending() -> None:
    with (
        pytest.raises(HubError, match=r"^push alice/x: tags\.0: String should have at most 64"),
        checked_request("push alice/x"),
    ):
        ResolveRequest(name="x", tags=["t" * 65])
    with (
        pytest.raises(HubError, match="^push run: request: environments must name exactly one"),
        checked_request("push run"),
    ):
        CreateEvaluation(name="n", model_name="m")
