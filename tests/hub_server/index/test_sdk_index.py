"""Every hub serves the SDK it runs with at /_sdk/simple/prime-envhub-sdk/ (no seeding), and no
one can upload a project under the SDK's name (in-process hub, real wheels)."""

from __future__ import annotations

import hashlib
import importlib.metadata
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from hub_server.admin import create_token, create_user, open_database
from hub_server.app import create_app
from hub_server.core.settings import HubSettings
from hub_server.index.sdk import pack_sdk_wheel
from registry_index.sdk import SDK_DISTRIBUTION, SDK_OWNER
from registry_index.validation import validate_distribution
from tests.hub_server.wheels import wheel_bytes

JSON = {"Accept": "application/vnd.pypi.simple.v1+json"}


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, str]]:
    settings = HubSettings(data_dir=Path(tmp_path_factory.mktemp("sdk-hub")))
    engine = open_database(settings)
    create_user(engine, "alice")
    token = create_token(engine, "alice", "cli")[0]
    engine.dispose()
    with TestClient(create_app(settings)) as client:
        yield client, token


def test_a_fresh_hub_serves_the_sdk_it_runs_with(
    hub: tuple[TestClient, str], tmp_path: Path
) -> None:
    client, _ = hub
    index = client.get(f"/{SDK_OWNER}/simple/", headers=JSON)
    assert index.status_code == 200
    assert [p["name"] for p in index.json()["projects"]] == [SDK_DISTRIBUTION]

    page = client.get(f"/{SDK_OWNER}/simple/{SDK_DISTRIBUTION}/", headers=JSON).json()
    version = importlib.metadata.version(SDK_DISTRIBUTION)
    assert page["versions"] == [version]
    (entry,) = page["files"]
    assert entry["filename"] == f"prime_envhub_sdk-{version}-py3-none-any.whl"
    assert entry["requires-python"] == ">=3.11"
    html = client.get(f"/{SDK_OWNER}/simple/{SDK_DISTRIBUTION}/").text
    assert f"#sha256={entry['hashes']['sha256']}" in html

    base = f"/{SDK_OWNER}/simple/{SDK_DISTRIBUTION}/"
    wheel = client.get(base + entry["url"])
    assert wheel.status_code == 200
    assert hashlib.sha256(wheel.content).hexdigest() == entry["hashes"]["sha256"]
    path = tmp_path / entry["filename"]
    path.write_bytes(wheel.content)
    # A wheel like any other: it passes the index's own upload validation (RECORD, sizes).
    checked = validate_distribution(path, path.name)
    assert checked.metadata.name == SDK_DISTRIBUTION
    metadata = client.get(base + entry["url"] + ".metadata")
    assert hashlib.sha256(metadata.content).hexdigest() == entry["core-metadata"]["sha256"]
    # Only what an environment needs: no hub, CLI or trainer code, no hub dependencies.
    with zipfile.ZipFile(path) as archive:
        tops = {name.split("/", 1)[0] for name in archive.namelist()}
    assert tops == {
        "local_model",
        "prime_env",
        "registry_index",
        "sandbox",
        entry["filename"].split("-py3")[0] + ".dist-info",
    }
    required = {
        canonicalize_name(req.name)
        for req in map(Requirement, checked.metadata.requires_dist)
        if req.marker is None or "extra" not in str(req.marker)
    }
    assert required and not required & {
        "fastapi",
        "sqlmodel",
        "alembic",
        "twine",
        "uvicorn",
        "torch",
    }

    assert client.get(f"/{SDK_OWNER}/simple/other/", headers=JSON).status_code == 404
    assert client.get(f"/{SDK_OWNER}/files/{SDK_DISTRIBUTION}/x.whl").status_code == 404
    redirect = client.get(f"/{SDK_OWNER}/simple/Prime_EnvHub.SDK/", follow_redirects=False)
    assert redirect.status_code == 301


def test_every_owners_index_answers_the_sdk_too(hub: tuple[TestClient, str]) -> None:
    """An installer given only `HUB/alice/simple/` (the stock client's --extra-index-url)
    resolves an environment's SDK there: the same wheel, downloaded from `/_sdk/files/`."""
    client, _ = hub
    own = client.get(f"/{SDK_OWNER}/simple/{SDK_DISTRIBUTION}/", headers=JSON).json()
    base = f"/alice/simple/{SDK_DISTRIBUTION}/"
    page = client.get(base, headers=JSON).json()
    (entry,) = page["files"]
    assert page["versions"] == own["versions"]
    assert entry["hashes"] == own["files"][0]["hashes"]
    assert entry["url"].startswith(f"../../../{SDK_OWNER}/files/")
    wheel = client.get(base + entry["url"])
    assert hashlib.sha256(wheel.content).hexdigest() == entry["hashes"]["sha256"]
    assert f"#sha256={entry['hashes']['sha256']}" in client.get(base).text
    assert client.get(f"/nobody/simple/{SDK_DISTRIBUTION}/", headers=JSON).status_code == 404


def test_packing_is_deterministic() -> None:
    first, second = pack_sdk_wheel(), pack_sdk_wheel()
    assert first.sha256 == second.sha256 and first.data == second.data


@pytest.mark.parametrize("name", [SDK_DISTRIBUTION, "Prime_EnvHub.SDK"])
def test_no_one_may_upload_under_the_sdk_name(hub: tuple[TestClient, str], name: str) -> None:
    client, token = hub
    resolved = client.post(
        "/api/v1/environmentshub/resolve",
        headers={"Authorization": f"Bearer {token}"},
        json={"name": name},
    )
    assert resolved.status_code == 400 and "reserved" in resolved.json()["detail"]

    data = wheel_bytes(name, "9.0.0")
    filename = f"{name.replace('-', '_').replace('.', '_')}-9.0.0-py3-none-any.whl"
    legacy = client.post(
        "/alice/legacy/",
        auth=("__token__", token),
        data={
            ":action": "file_upload",
            "protocol_version": "1",
            "name": name,
            "version": "9.0.0",
            "filetype": "bdist_wheel",
            "pyversion": "py3",
            "metadata_version": "2.1",
            "sha256_digest": hashlib.sha256(data).hexdigest(),
        },
        files={"content": (filename, data, "application/octet-stream")},
    )
    assert legacy.status_code == 400 and "reserved" in legacy.text
    # alice's index answers the SDK's name with the hub's own SDK, never an upload of hers
    served = client.get(f"/alice/simple/{SDK_DISTRIBUTION}/", headers=JSON).json()
    assert served["versions"] == [importlib.metadata.version(SDK_DISTRIBUTION)] != ["9.0.0"]
