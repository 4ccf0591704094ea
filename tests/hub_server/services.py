"""Throwaway PostgreSQL clusters and S3-compatible servers on loopback, for the hub tests.

Both are real servers: Debian's PostgreSQL binaries (`initdb` + `postgres` in a temp dir,
run as the `postgres` user when the tests run as root) and moto's S3 server mode.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from testing.benchmarks import stop_process
from tests.support import free_port


def postgres_bin() -> Path | None:
    """The newest installed PostgreSQL server binaries, or None."""
    root = Path("/usr/lib/postgresql")
    versions = (
        sorted(root.glob("*/bin/postgres"), key=lambda p: int(p.parent.parent.name))
        if root.is_dir()
        else []
    )
    return versions[-1].parent if versions else None


def _as_postgres(command: list[str]) -> list[str]:
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *command]
    return command


@contextmanager
def postgres_cluster() -> Iterator[str]:
    """Start a fresh cluster and yield a SQLAlchemy URL of an empty database `hub`.

    The cluster lives in its own directory under the system temp dir (pytest's tmp dirs are
    private to root, and the server runs as `postgres`) and is removed afterwards.
    """
    bin_dir = postgres_bin()
    if bin_dir is None:
        raise RuntimeError("PostgreSQL server binaries are not installed")
    workdir = Path(tempfile.mkdtemp(prefix="hub-pg-"))
    data = workdir / "pgdata"
    if os.geteuid() == 0:
        shutil.chown(workdir, "postgres", "postgres")
        workdir.chmod(0o700)
    subprocess.run(
        _as_postgres([str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres",
                      "--no-sync", "-E", "UTF8"]),
        check=True, capture_output=True,
    )  # fmt: skip
    port = free_port()
    server = subprocess.Popen(
        _as_postgres([str(bin_dir / "postgres"), "-D", str(data), "-p", str(port), "-k", str(workdir),
                      "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "max_connections=200"]),
        stdout=subprocess.DEVNULL, stderr=(workdir / "postgres.log").open("wb"),
    )  # fmt: skip
    try:
        # Ready is pg_isready's answer; the bound only catches a server that hangs (a loaded
        # host makes start-up slow, not wrong). The finally below stops it on any failure.
        deadline = time.monotonic() + 300
        while True:
            ready = subprocess.run(
                [str(bin_dir / "pg_isready"), "-h", "127.0.0.1", "-p", str(port)],
                capture_output=True,
                check=False,
            )
            if ready.returncode == 0:
                break
            if time.monotonic() > deadline or server.poll() is not None:
                raise RuntimeError("PostgreSQL did not start")
            time.sleep(0.2)
        subprocess.run(
            [str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "hub"],
            check=True, capture_output=True,
        )  # fmt: skip
        yield f"postgresql://postgres@127.0.0.1:{port}/hub"
    finally:
        stop_process(server, 30)
        shutil.rmtree(workdir, ignore_errors=True)


@contextmanager
def s3_server(bucket: str) -> Iterator[dict[str, str]]:
    """A moto S3 server on loopback with `bucket` created; yields the hub's env settings."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    credentials = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    try:
        import boto3

        s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1")  # fmt: skip
        s3.create_bucket(Bucket=bucket)
        yield {
            **credentials,
            "PRIME_HUB_STORAGE_URL": f"s3://{bucket}/hub",
            "PRIME_HUB_S3_ENDPOINT_URL": endpoint,
        }
    finally:
        server.stop()
