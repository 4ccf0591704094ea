"""Issue 26, class 11: a full disk gave uploads a bare 500 (the data stayed consistent). On a
real small filesystem (a tmpfs of a few MiB, filled up), every upload path answers 507 with a
message saying the hub is out of space, stores nothing, and works again once there is room;
the same when the database's disk is the full one."""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.hub_server.hardening_hub import HardenedHub
from tests.hub_server.wheels import twine_upload_form, wheel_bytes
from tests.support import require

API = "/api/v1/environmentshub"
EVALS = "/api/v1/evaluations"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs, unmounted afterwards."""
    mount = tmp_path / "small"
    mount.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)],
                             capture_output=True, check=False)  # fmt: skip
    require(mounted.returncode == 0, "mounting a tmpfs (root)")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path) -> Path:
    """Fill `disk` to the last byte; returns the filler file (delete it to make room)."""
    filler = disk / "filler"
    with filler.open("wb", buffering=0) as handle:
        for size in (65536, 4096, 1):
            try:
                while True:
                    handle.write(b"\0" * size)
            except OSError:
                continue
    return filler


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def uploads(hub: HardenedHub, client: TestClient, version: str) -> dict[str, Any]:
    """Every way bytes reach the hub, once each: the twine upload, a REST push's PUT, an eval
    batch; the answers by name."""
    token = hub.tokens["alice"]
    data = wheel_bytes("wordle", version, module_source="X = '" + "z" * 200_000 + "'\n")
    fields, files = twine_upload_form("wordle", version, data)
    answers: dict[str, Any] = {
        "twine": client.post("/alice/legacy/", auth=("__token__", token), data=fields, files=files)
    }
    env_id = hub.env_ids["alice/other"]
    other = wheel_bytes("other", version)
    reserved = client.post(f"{API}/{env_id}/wheels", headers=auth(token), json={
        "filename": f"other-{version}-py3-none-any.whl", "semantic_version": version,
        "sha256": hashlib.sha256(other).hexdigest(), "size": len(other)})  # fmt: skip
    if reserved.status_code == 200:
        url = reserved.json()["data"]["upload_url"].removeprefix("http://testserver")
        answers["rest-put"] = client.put(url, content=other)
    else:
        answers["rest-put"] = reserved
    run = client.post(f"{EVALS}/", headers=auth(token), json={
        "name": "r", "environments": [{"slug": "alice/wordle"}], "model_name": "m"})  # fmt: skip
    if run.status_code == 200:
        run_id = run.json()["data"]["id"]
        samples = [
            {"example_index": i, "reward": 1.0, "completion": "c" * 5000} for i in range(200)
        ]
        answers["eval-batch"] = client.post(f"{EVALS}/{run_id}/samples", headers=auth(token),
                                            json={"samples": samples})  # fmt: skip
        answers["eval-count"] = client.get(f"{EVALS}/{run_id}", headers=auth(token))
    else:
        answers["eval-batch"] = run
    return answers


def assert_out_of_space(answers: dict[str, Any]) -> None:
    for name in ("twine", "rest-put", "eval-batch"):
        answer = answers[name]
        assert answer.status_code == 507, (name, answer.status_code, answer.text[-300:])
        assert "out of storage space" in answer.text, (name, answer.text)
    twine = answers["twine"]
    assert "out of storage space" in twine.headers.get("x-hub-reason", twine.text)


def test_a_full_blob_disk_is_a_507_and_stores_nothing(small_disk: Path, tmp_path: Path) -> None:
    hub = HardenedHub(tmp_path / "data", storage_url=str(small_disk / "blobs"))
    with hub.client() as client:
        filler = fill(small_disk)
        full = uploads(hub, client, "0.5.0")
        assert_out_of_space(full)
        if "eval-count" in full:
            assert full["eval-count"].json()["data"]["sample_count"] == 0
        assert client.get("/alice/simple/wordle/").text.count("wordle-0.5.0") == 0
        filler.unlink()
        again = uploads(hub, client, "0.5.0")
        for name in ("twine", "rest-put", "eval-batch"):
            assert again[name].status_code == 200, (name, again[name].text[-300:])


def test_a_full_database_disk_is_a_507(small_disk: Path, tmp_path: Path) -> None:
    hub = HardenedHub(small_disk / "data", storage_url=str(tmp_path / "blobs"))
    with hub.client() as client:
        filler = fill(small_disk)
        created = client.post(f"{EVALS}/", headers=auth(hub.tokens["alice"]), json={
            "name": "r", "environments": [{"slug": "alice/wordle"}], "model_name": "m"})  # fmt: skip
        assert created.status_code == 507, created.text[-300:]
        assert "out of storage space" in created.text
        # Reads still work with a token (recording its use waits for room).
        read = client.get(f"{API}/alice/wordle", headers=auth(hub.tokens["bob"]))
        assert read.status_code == 200, read.text[-300:]
        filler.unlink()
        created = client.post(f"{EVALS}/", headers=auth(hub.tokens["alice"]), json={
            "name": "r", "environments": [{"slug": "alice/wordle"}], "model_name": "m"})  # fmt: skip
        assert created.status_code == 200, created.text[-300:]
