"""The scale-out backends for real: PostgreSQL (a throwaway cluster) and S3 (moto's server)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.hub_server.hubproc import HubProcess, start_hub
from tests.hub_server.index.test_clients import BIN, fresh_venv, run, twine_upload
from tests.hub_server.index.test_upload_safety import upload
from tests.hub_server.registry.test_rest_api import client, push
from tests.hub_server.services import postgres_bin, postgres_cluster, s3_server
from tests.hub_server.wheels import wheel_bytes, write_wheel
from tests.support import require


@pytest.fixture(scope="module")
def pg_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HubProcess]:
    require(postgres_bin() is not None, "PostgreSQL (Debian package postgresql)")
    with (
        postgres_cluster() as url,
        start_hub(tmp_path_factory.mktemp("pghub"), {"PRIME_HUB_DATABASE_URL": url}) as hub,
    ):
        yield hub


@pytest.fixture(scope="module")
def s3_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HubProcess, dict[str, str]]]:
    with s3_server("hub-blobs") as env, start_hub(tmp_path_factory.mktemp("s3hub"), env) as hub:
        yield hub, env


@pytest.mark.postgres
def test_postgres_upload_install_and_race(pg_hub: HubProcess, tmp_path: Path) -> None:
    assert not (pg_hub.data_dir / "hub.sqlite3").exists()
    token = pg_hub.add_user("petra")
    wheel = write_wheel(tmp_path, "pg-env", "0.1.0", module_source="WHERE = 'postgres'\n")
    assert twine_upload(pg_hub, token, wheel).returncode == 0
    python = fresh_venv(tmp_path / "venv")
    run(str(BIN / "uv"), "pip", "install", "--no-cache", "--python", str(python),
        "--index-url", f"{pg_hub.url}/petra/simple/", "pg-env")  # fmt: skip
    assert run(str(python), "-c", "import pg_env; print(pg_env.WHERE)").stdout.strip() == "postgres"

    data = wheel_bytes("pg-race", "1.0.0")
    with ThreadPoolExecutor(20) as pool:
        codes = list(pool.map(
            lambda _: upload(httpx, f"{pg_hub.url}/petra/legacy/", token, "pg_race-1.0.0-py3-none-any.whl", data).status_code,
            range(20),
        ))  # fmt: skip
    assert codes == [200] * 20
    versions = httpx.get(f"{pg_hub.url}/api/v1/environmentshub/petra/pg-race/versions").json()[
        "data"
    ]
    assert len(versions) == 1 and len(versions[0]["files"]) == 1

    pushed = push(client(pg_hub, token), "pg-pushed", "2.0.0", visibility="private")
    assert pushed["success"]
    assert httpx.get(f"{pg_hub.url}/petra/simple/pg-pushed/").status_code == 404


def test_s3_store_presigned_upload_and_install(
    s3_hub: tuple[HubProcess, dict[str, str]], tmp_path: Path
) -> None:
    hub, env = s3_hub
    token = hub.add_user("sid")
    api = client(hub, token)
    env_id = api.post("/api/v1/environmentshub/resolve", json={"name": "s3-env"}).json()["data"][
        "id"
    ]
    wheel = wheel_bytes("s3-env", "1.0.0", module_source="STORE = 's3'\n")
    reserved = api.post(
        f"/api/v1/environmentshub/{env_id}/wheels",
        json={"filename": "s3_env-1.0.0-py3-none-any.whl", "semantic_version": "1.0.0",
              "sha256": hashlib.sha256(wheel).hexdigest(), "size": len(wheel)},
    ).json()["data"]  # fmt: skip
    endpoint = env["PRIME_HUB_S3_ENDPOINT_URL"]
    assert reserved["upload_url"].startswith(endpoint) and "Signature" in reserved["upload_url"]
    assert httpx.put(reserved["upload_url"], content=wheel).status_code == 200
    done = api.post(f"/api/v1/environmentshub/{env_id}/wheels/{reserved['wheel_id']}/finalize")
    assert done.status_code == 200, done.text

    import boto3

    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                      aws_access_key_id="testing", aws_secret_access_key="testing")  # fmt: skip
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="hub-blobs").get("Contents", [])]
    sha = hashlib.sha256(wheel).hexdigest()
    assert f"hub/sha256/{sha[:2]}/{sha}" in keys
    assert not any(k.startswith("hub/staging/") for k in keys)

    other = write_wheel(tmp_path / "dist", "s3-twine", "0.3.0")
    assert twine_upload(hub, token, other).returncode == 0
    python = fresh_venv(tmp_path / "venv")
    run(str(BIN / "uv"), "pip", "install", "--no-cache", "--python", str(python),
        "--index-url", f"{hub.url}/sid/simple/", "s3-env", "s3-twine")  # fmt: skip
    assert run(str(python), "-c", "import s3_env; print(s3_env.STORE)").stdout.strip() == "s3"
    metadata = httpx.get(
        f"{hub.url}/sid/files/s3-env/s3_env-1.0.0-py3-none-any.whl.metadata", follow_redirects=True
    )
    assert metadata.status_code == 200 and b"Name: s3-env" in metadata.content
