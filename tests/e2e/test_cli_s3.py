"""`prime env push / install / pull` against a hub at scale: PostgreSQL and S3 (moto server).

The hub answers downloads with a 307 to a presigned S3 URL and hands out presigned PUT URLs for
uploads; the CLI must follow the redirect without carrying the hub token to the storage origin
(S3 refuses a request that is both presigned and carries an Authorization header).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.cli_support import cli_env, fresh_venv, installed, ok, prime, write_env
from tests.hub_server.hubproc import HubProcess, start_hub
from tests.hub_server.services import postgres_bin, postgres_cluster, s3_server
from tests.support import require

pytestmark = [pytest.mark.timeout(900), pytest.mark.postgres, pytest.mark.slow]


@pytest.fixture(scope="module")
def s3_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HubProcess]:
    require(postgres_bin() is not None, "PostgreSQL (Debian package postgresql)")
    with (
        postgres_cluster() as database,
        s3_server("cli-blobs") as storage,
        start_hub(
            tmp_path_factory.mktemp("s3hub"), {**storage, "PRIME_HUB_DATABASE_URL": database}
        ) as hub,
    ):
        yield hub


def test_push_install_pull_through_presigned_urls(s3_hub: HubProcess, tmp_path: Path) -> None:
    token = s3_hub.add_user("sam")
    env = cli_env(tmp_path / "home", s3_hub.url)
    root = write_env(tmp_path, "s3-cli-env")
    pushed = json.loads(
        ok(prime(env, "env", "push", str(root), "-v", "private", "--output", "json", token=token))
    )
    assert pushed["environment"] == "sam/s3-cli-env"

    record = httpx.get(
        f"{s3_hub.url}/api/v1/environmentshub/sam/s3-cli-env/@latest",
        headers={"Authorization": f"Bearer {token}"},
    ).json()["data"]
    first_hop = httpx.get(record["wheel_url"], headers={"Authorization": f"Bearer {token}"})
    assert first_hop.status_code == 307  # the case the CLI has to follow
    assert not first_hop.headers["location"].startswith(s3_hub.url)

    python = fresh_venv(tmp_path / "venv", env)
    ok(prime(env, "env", "install", "sam/s3-cli-env", "--python", str(python), token=token))
    assert installed(python, "s3-cli-env") == "0.1.0"

    target = tmp_path / "pulled"
    ok(prime(env, "env", "pull", "sam/s3-cli-env", "-t", str(target), token=token))
    for rel in ("pyproject.toml", "README.md", "s3_cli_env/__init__.py"):
        assert (target / rel).read_bytes() == (root / rel).read_bytes()
