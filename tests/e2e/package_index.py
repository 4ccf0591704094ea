"""A real "normal" package index on loopback (pypiserver over a directory of wheels), standing in
for PyPI in the install tests."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.support import free_port, require

PYPI_SERVER = Path(sys.executable).with_name("pypi-server")


@contextmanager
def serve_packages(packages: Path, log_path: Path, *, fallback: str | None = None) -> Iterator[str]:
    """pypiserver serving `packages`; yields its simple-index URL. A name it lacks is a 404, or
    a redirect to `fallback` (a public index's simple URL) when one is given."""
    require(PYPI_SERVER.exists(), "pypiserver (dev extra)")
    port = free_port()
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [
                str(PYPI_SERVER), "run", "-i", "127.0.0.1", "-p", str(port), "-a", ".", "-P", ".",
                *(["--fallback-url", fallback] if fallback else ["--disable-fallback"]),
                "--backend", "simple-dir", str(packages),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}/simple/"
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    if httpx.get(url, timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"pypiserver did not start (see {log_path})")
                time.sleep(0.1)
            yield url
        finally:
            proc.terminate()
            proc.wait(10)
