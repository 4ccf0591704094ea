"""What the benches (scripts/bench_*.py) share: their section of docs/benchmarks.md, a hub
server they started and wait for, and small valid wheels to upload.
"""

from __future__ import annotations

import base64
import hashlib
import io
import socket
import subprocess
import sys
import time
import zipfile
from collections.abc import Mapping
from pathlib import Path

import httpx

BENCHMARKS_MD = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"


def write_section(heading: str, section: str, path: Path = BENCHMARKS_MD) -> None:
    """Replace the `heading` section (`## Name`: up to the next `## `) of docs/benchmarks.md
    with `section` (which starts with the heading), or append it; nothing else changes."""
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    start = text.find(f"\n{heading}\n")
    if start == -1:
        text = text.rstrip("\n") + "\n\n" + section.rstrip("\n") + "\n"
    else:
        end = text.find("\n## ", start + 1)
        text = text[: start + 1] + section.rstrip("\n") + "\n" + (text[end:] if end != -1 else "")
    path.write_text(text)


def serve_hub(
    data_dir: Path, env: Mapping[str, str], log: Path, timeout_s: float
) -> tuple[subprocess.Popen[bytes], str]:
    """`prime hub serve` of `data_dir` on a free loopback port, its output in `log`, once it
    answers: the process and its URL. One that does not come up is stopped (SystemExit)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    prime = Path(sys.executable).with_name("prime")
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(prime), "hub", "serve", "--port", str(port), "--data-dir", str(data_dir)],
            env=dict(env),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(url, process, timeout_s, log)
    except SystemExit:
        stop_process(process, 15)
        raise
    return process, url


def stop_process(process: subprocess.Popen[bytes], timeout_s: float) -> None:
    """SIGTERM `process` and wait for it; SIGKILL it (and reap it) if it outlives `timeout_s`."""
    process.terminate()
    try:
        process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def wait_until_up(url: str, server: subprocess.Popen[bytes], timeout_s: float, log: Path) -> None:
    """Poll `url/healthz` until the hub answers 200; SystemExit with its log's tail when it
    exits or does not answer within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline or server.poll() is not None:
            tail = log.read_text()[-2000:] if log.is_file() else "(no log)"
            raise SystemExit(f"the hub at {url} did not start; {log}:\n{tail}")
        time.sleep(0.2)


def wheel_bytes(module: str, version: str, members: dict[str, bytes]) -> tuple[str, bytes]:
    """A valid pure-Python wheel of `members` (paths in the archive) with its RECORD: the
    filename and the bytes."""
    dist_info = f"{module}-{version}.dist-info"
    files = dict(members)
    files.setdefault(
        f"{dist_info}/WHEEL",
        b"Wheel-Version: 1.0\nGenerator: bench\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    )
    record = "".join(f"{path},{_record_hash(data)},{len(data)}\n" for path, data in files.items())
    files[f"{dist_info}/RECORD"] = (record + f"{dist_info}/RECORD,,\n").encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, data in files.items():
            archive.writestr(path, data)
    return f"{module}-{version}-py3-none-any.whl", buffer.getvalue()


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"
