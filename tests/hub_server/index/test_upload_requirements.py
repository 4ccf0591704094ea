"""Both upload routes refuse a `Requires-Dist` with a direct URL, as PyPI does (in-process hub):
installing such a wheel would make uv/pip fetch, build and run whatever the URL serves."""

from __future__ import annotations

import hashlib

import pytest

from tests.hub_server.inproc import InProcessHub
from tests.hub_server.wheels import wheel_bytes

API = "/api/v1/environmentshub"
URLS = [
    "evil @ file:///tmp/evil",
    "evil @ https://example.invalid/evil-1.0.tar.gz",
    "evil @ git+https://example.invalid/evil.git@main",
]


def url_wheel(name: str, requirement: str) -> bytes:
    dist = name.replace("-", "_")
    metadata = (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0.0\nSummary: s\n"
        f"Requires-Dist: packaging>=24\nRequires-Dist: {requirement}\n\n"
    )
    return wheel_bytes(
        name, "1.0.0", extra_members={f"{dist}-1.0.0.dist-info/METADATA": metadata.encode()}
    )


@pytest.mark.parametrize("requirement", URLS)
def test_twine_upload_refuses_direct_url_dependencies(
    inproc_hub: InProcessHub, requirement: str
) -> None:
    token = inproc_hub.admin_token
    name = f"url-env-{URLS.index(requirement)}"
    data = url_wheel(name, requirement)
    response = inproc_hub.http.post(
        "/admin/legacy/",
        auth=("__token__", token),
        data={
            ":action": "file_upload", "protocol_version": "1", "name": name, "version": "1.0.0",
            "filetype": "bdist_wheel", "pyversion": "py3", "metadata_version": "2.1",
            "sha256_digest": hashlib.sha256(data).hexdigest(),
        },
        files={"content": (f"{name.replace('-', '_')}-1.0.0-py3-none-any.whl", data)},
    )  # fmt: skip
    assert response.status_code == 400, response.text
    assert "direct URL dependency" in response.text and requirement in response.text
    assert inproc_hub.http.get(f"/admin/simple/{name}/").status_code == 404


def test_rest_push_refuses_direct_url_dependencies(inproc_hub: InProcessHub) -> None:
    api = inproc_hub.client(inproc_hub.admin_token)
    env_id = api.post(f"{API}/resolve", json={"name": "rest-url-env"}).json()["data"]["id"]
    data = url_wheel("rest-url-env", URLS[2])
    reserved = api.post(
        f"{API}/{env_id}/wheels",
        json={
            "filename": "rest_url_env-1.0.0-py3-none-any.whl",
            "semantic_version": "1.0.0",
            "sha256": hashlib.sha256(data).hexdigest(),
            "size": len(data),
        },
    ).json()["data"]
    assert inproc_hub.http.put(reserved["upload_url"], content=data).status_code == 200
    refused = api.post(f"{API}/{env_id}/wheels/{reserved['wheel_id']}/finalize")
    assert refused.status_code == 400, refused.text
    assert "direct URL dependency" in refused.json()["detail"]
    assert "evil @ git+https://example.invalid/evil.git@main" in refused.json()["detail"]
