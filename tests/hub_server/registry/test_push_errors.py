"""Bad input to the REST push flow: clear 4xx answers, nothing stored, no 500s (in-process)."""

from __future__ import annotations

import hashlib

import httpx
import pytest

from tests.hub_server.index.test_upload_safety import stored_blobs, upload
from tests.hub_server.inproc import InProcessHub
from tests.hub_server.wheels import wheel_bytes

API = "/api/v1/environmentshub"


@pytest.fixture
def fresh_hub(fresh_inproc_hub: InProcessHub) -> InProcessHub:
    return fresh_inproc_hub


def reserve(api: httpx.Client, env_id: str, data: bytes, **overrides: object) -> httpx.Response:
    body = {
        "filename": "edge_env-1.0.0-py3-none-any.whl",
        "semantic_version": "1.0.0",
        "sha256": hashlib.sha256(data).hexdigest(),
        "size": len(data),
        **overrides,
    }
    return api.post(f"{API}/{env_id}/wheels", json=body)


def test_push_errors_are_clear_and_leave_nothing(fresh_hub: InProcessHub) -> None:
    api = fresh_hub.client(fresh_hub.admin_token)
    bad_name = api.post(f"{API}/resolve", json={"name": "no spaces/allowed"})
    assert bad_name.status_code == 400 and "not a valid project name" in bad_name.json()["detail"]
    assert api.post(f"{API}/resolve", json={}).status_code == 400
    anonymous = fresh_hub.http.post(f"{fresh_hub.url}{API}/resolve", json={"name": "x"})
    assert anonymous.status_code == 401
    env_id = api.post(f"{API}/resolve", json={"name": "edge-env"}).json()["data"]["id"]
    data = wheel_bytes("edge-env", "1.0.0")

    cases = {
        "other project": ({"filename": "other_env-1.0.0-py3-none-any.whl"}, 400, "not a wheel of"),
        "version mismatch": ({"semantic_version": "2.0.0"}, 400, "semantic_version"),
        "local version": ({"semantic_version": "1.0.0+dev"}, 400, "local"),
        "bad sha": ({"sha256": "xyz"}, 400, "sha256"),
        # over the file limit (413), or first over the per-user quota of unfinished uploads (429)
        "too large": ({"size": 2**31 - 1}, (413, 429), "limit|quota"),
        # more than a size column stores (registry_index.bounds.MAX_STORED_INT)
        "far too large": ({"size": 10**12}, 400, "size"),
        "unknown env": ({}, 404, "resolve"),
    }
    for label, (overrides, status, text) in cases.items():
        target = "0" * 32 if label == "unknown env" else env_id
        response = reserve(api, target, data, **overrides)
        assert response.status_code in (status if isinstance(status, tuple) else (status,)), (
            label,
            response.text,
        )
        detail = response.json()["detail"]
        assert any(part in detail for part in text.split("|")), (label, response.text)

    good = reserve(api, env_id, data).json()["data"]
    early = api.post(f"{API}/{env_id}/wheels/{good['wheel_id']}/finalize")
    assert early.status_code == 400 and "PUT" in early.json()["detail"]
    forged = fresh_hub.http.put(good["upload_url"].split("?")[0] + "?token=forged", content=data)
    assert forged.status_code == 404
    wrong = fresh_hub.http.put(good["upload_url"], content=data + b"junk")
    assert wrong.status_code in (400, 413)

    # Announced and uploaded bytes agree, but the wheel itself is hostile.
    hostile = wheel_bytes("edge-env", "1.0.0", extra_members={"../escape.py": b"x"})
    reserved = reserve(api, env_id, hostile).json()["data"]
    assert fresh_hub.http.put(reserved["upload_url"], content=hostile).status_code == 200
    refused = api.post(f"{API}/{env_id}/wheels/{reserved['wheel_id']}/finalize")
    assert refused.status_code == 400 and "traversal" in refused.json()["detail"]
    assert api.post(f"{API}/{env_id}/wheels/{reserved['wheel_id']}/finalize").status_code == 404
    assert stored_blobs(fresh_hub) == []

    archive = b"not a tarball"
    source = api.post(
        f"{API}/{env_id}/versions",
        json={"filename": "edge-env-1.0.0-abcdef12.tar.gz", "semantic_version": "1.0.0",
              "sha256": hashlib.sha256(archive).hexdigest()},
    ).json()["data"]  # fmt: skip
    assert fresh_hub.http.put(source["upload_url"], content=archive).status_code == 200
    refused = api.post(f"{API}/{env_id}/versions/{source['version_id']}/finalize")
    assert refused.status_code == 400 and ".tar.gz" in refused.json()["detail"]
    assert stored_blobs(fresh_hub) == []
    assert fresh_hub.http.get(f"{fresh_hub.url}{API}/admin/edge-env/versions").json()["data"] == []


def test_a_finalize_refused_for_a_filename_taken_meanwhile_leaves_no_blob(
    fresh_hub: InProcessHub,
) -> None:
    """The filename is free at reservation, then a twine upload takes it with other bytes: the
    finalize is refused before its blob is written (publish_file checks the file first), and
    its staged bytes and scratch copy are removed; the twine upload's file is untouched."""
    api = fresh_hub.client(fresh_hub.admin_token)
    env_id = api.post(f"{API}/resolve", json={"name": "edge-env"}).json()["data"]["id"]
    pushed, uploaded = (
        wheel_bytes("edge-env", "1.0.0"),
        wheel_bytes("edge-env", "1.0.0", summary="B"),
    )
    reserved = reserve(api, env_id, pushed).json()["data"]
    assert fresh_hub.http.put(reserved["upload_url"], content=pushed).status_code == 200
    response = upload(fresh_hub.http, f"{fresh_hub.url}/admin/legacy/", fresh_hub.admin_token,
                      "edge_env-1.0.0-py3-none-any.whl", uploaded)  # fmt: skip
    assert response.status_code == 200, response.text
    refused = api.post(f"{API}/{env_id}/wheels/{reserved['wheel_id']}/finalize")
    assert refused.status_code == 400 and "File already exists" in refused.json()["detail"]
    assert [(p.name, p.read_bytes()) for p in stored_blobs(fresh_hub)] == [
        (hashlib.sha256(uploaded).hexdigest(), uploaded)
    ]
