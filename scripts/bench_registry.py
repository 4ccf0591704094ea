#!/usr/bin/env python
"""Registry benchmark: our hub against pypiserver and devpi, side by side, same data, one run.

All servers run on 127.0.0.1 from this machine, get the same generated wheels (default 2,000
projects x 3 files), and are then measured with the same client code, requests alternating
between the servers:

* seeding: the hub and devpi get every file over HTTP with N concurrent twine-style uploads
  (reported as throughput); pypiserver gets them copied into its package directory, its own
  bulk path (its single-threaded server times out connections with several uploads in flight);
* upload latency: one upload at a time, fresh files (p50, p99);
* server CPU per upload: each server process's CPU time (`/proc`, all threads) across those
  uploads, divided by their number (steadier than latency on a shared machine);
* simple-page latency for project pages and the root index, with the `Accept` header pip sends
  (p50, p99; a new connection per request for both servers);
* `uv pip install --no-deps --no-cache` of one package into a fresh virtualenv (median).

It prints a table with ratios hub/peer (lower is better, target <= 1.0) and the load, and,
with `--write-docs`, replaces the `## Registry` section of docs/benchmarks.md.

Each peer runs in its fastest configuration found here:
- pypiserver: the `cached-dir` backend (watchdog), fallback to PyPI disabled, authentication
  off (no password check at all on uploads);
- devpi (devpi-server + devpi-client from PyPI, in a venv of their own created with uv when
  missing, `--devpi-venv`): no devpi-web (its search index is updated on every upload), no
  root/pypi mirror, `--offline-mode`, a larger keyfs cache, a non-volatile index (immutable
  files, like the hub), and uploads authenticated with a login token (`X-Devpi-Auth`, what
  `devpi login` + `devpi upload` send) rather than the password, which devpi would hash with
  argon2 on every request.
The hub is started with `prime hub serve`, its upload rate limit raised for seeding
(`PRIME_HUB_UPLOADS_PER_MINUTE`).

Quick mode (CI smoke run): `python scripts/bench_registry.py --quick`.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import http.client
import os
import platform
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import httpx

from testing.benchmarks import wheel_bytes, write_section

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
DEVPI = ["devpi-server", "devpi-client"]
PEERS = ("pypiserver", "devpi")
PIP_ACCEPT = (
    "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html; q=0.1, "
    "text/html; q=0.01"
)
OWNER = "bench"
T = TypeVar("T")


# --- data set ------------------------------------------------------------------------------


def build_wheel(project: str, version: str) -> tuple[str, bytes]:
    """A small, valid, installable pure-Python wheel (module, METADATA, WHEEL, RECORD)."""
    module = project.replace("-", "_")
    metadata = (
        f"Metadata-Version: 2.1\nName: {project}\nVersion: {version}\n"
        f"Summary: benchmark environment {project}\nRequires-Python: >=3.9\n\n"
        f"Benchmark package.\n"
    )
    return wheel_bytes(
        module,
        version,
        {
            f"{module}/__init__.py": f"VERSION = {version!r}\n".encode(),
            f"{module}-{version}.dist-info/METADATA": metadata.encode(),
        },
    )


@dataclass(frozen=True)
class Dist:
    project: str
    version: str
    filename: str
    data: bytes


def generate(projects: int, files_per_project: int, prefix: str = "env") -> list[Dist]:
    dists = []
    for index in range(projects):
        project = f"{prefix}-{index:05d}"
        for patch in range(files_per_project):
            version = f"1.0.{patch}"
            filename, data = build_wheel(project, version)
            dists.append(Dist(project, version, filename, data))
    return dists


# --- servers -------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until_up(
    url: str, process: subprocess.Popen[bytes], log: Path, timeout: float = 60
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(
                f"server exited early (code {process.returncode}); log:\n{log.read_text()}"
            )
        try:
            httpx.get(url, timeout=2)
            return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise SystemExit(
        f"server at {url} did not start within {timeout:.0f} s; log:\n{log.read_text()}"
    )


@dataclass
class Server:
    """One registry under test: where to upload, where the simple index is, how to stop it."""

    label: str
    upload_url: str
    simple_url: str
    auth: tuple[str, str] | None
    process: subprocess.Popen[bytes]
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def simple_path(self) -> str:
        return "/" + self.simple_url.split("/", 3)[3]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_pypiserver(work: Path, dists: list[Dist]) -> Server:
    packages = work / "pypiserver-packages"
    packages.mkdir()
    for dist in dists:
        (packages / dist.filename).write_bytes(dist.data)
    port = free_port()
    log = work / "pypiserver.log"
    command = [
        str(BIN / "pypi-server"), "run", "-i", "127.0.0.1", "-p", str(port),
        "-a", ".", "-P", ".", "--disable-fallback", "--backend", "cached-dir", str(packages),
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    wait_until_up(f"{base}/health", process, log)
    return Server("pypiserver", f"{base}/", f"{base}/simple/", None, process)


def ensure_devpi(venv: Path) -> Path:
    """devpi in a venv of its own (its pins are not ours), created with uv when missing."""
    if not (venv / "bin" / "devpi-server").exists():
        print(f"creating {venv} with {' '.join(DEVPI)} (uv)", flush=True)
        subprocess.run([str(BIN / "uv"), "venv", "-q", "-p", sys.executable, str(venv)], check=True)
        subprocess.run(
            [str(BIN / "uv"), "pip", "install", "-q", "--python", str(venv / "bin" / "python"),
             *DEVPI],
            check=True,
        )  # fmt: skip
    return venv / "bin"


def start_devpi(work: Path, bin_dir: Path) -> Server:
    """devpi-server at its best here (see the module docstring), a user `bench` with a login
    token and a non-volatile index `bench/dev`."""
    server_dir = work / "devpi-server"
    subprocess.run(
        [str(bin_dir / "devpi-init"), "--serverdir", str(server_dir), "--no-root-pypi"],
        check=True,
        capture_output=True,
    )
    port = free_port()
    log = work / "devpi.log"
    command = [str(bin_dir / "devpi-server"), "--serverdir", str(server_dir), "--host",
               "127.0.0.1", "--port", str(port), "--offline-mode", "--keyfs-cache-size", "100000"]  # fmt: skip
    process = subprocess.Popen(command, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    wait_until_up(f"{base}/+api", process, log, timeout=120)
    with httpx.Client(base_url=base, headers={"Accept": "application/json"}, timeout=60) as http:
        http.put("/bench", json={"password": "bench-password"}).raise_for_status()
        login = http.post("/+login", json={"user": "bench", "password": "bench-password"})
        token = login.raise_for_status().json()["result"]["password"]
        header = {"X-Devpi-Auth": base64.b64encode(f"bench:{token}".encode()).decode()}
        http.put("/bench/dev", json={"volatile": False, "bases": []}, headers=header)
        http.get("/bench/dev").raise_for_status()
    return Server("devpi", f"{base}/bench/dev/", f"{base}/bench/dev/+simple/", None, process,
                  header)  # fmt: skip


def _last_line(args: list[str], env: dict[str, str]) -> str:
    done = subprocess.run(args, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout.strip().splitlines()[-1]


def start_hub(work: Path) -> Server:
    data_dir = work / "hub-data"
    port = free_port()
    log = work / "hub.log"
    env = {**os.environ, "PRIME_HUB_UPLOADS_PER_MINUTE": "1000000"}
    env.pop("PRIME_HUB_DATABASE_URL", None)
    env.pop("PRIME_HUB_STORAGE_URL", None)
    prime = str(BIN / "prime")
    token = _last_line([prime, "hub", "user", "add", OWNER, "--data-dir", str(data_dir)], env)
    command = [prime, "hub", "serve", "--host", "127.0.0.1", "--port", str(port),
               "--data-dir", str(data_dir)]  # fmt: skip
    process = subprocess.Popen(command, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    wait_until_up(f"{base}/{OWNER}/simple/", process, log)
    return Server(
        "hub", f"{base}/legacy/", f"{base}/{OWNER}/simple/", ("__token__", token), process
    )


# --- measurements --------------------------------------------------------------------------


def _form(dist: Dist) -> dict[str, str]:
    return {
        ":action": "file_upload",
        "protocol_version": "1",
        "name": dist.project,
        "version": dist.version,
        "filetype": "bdist_wheel",
        "pyversion": "py3",
        "metadata_version": "2.1",
        "summary": f"benchmark environment {dist.project}",
        "requires_python": ">=3.9",
        "sha256_digest": hashlib.sha256(dist.data).hexdigest(),
    }


def _check_upload(server: Server, dist: Dist, response: httpx.Response) -> None:
    if response.status_code != 200:
        raise SystemExit(
            f"{server.label}: upload of {dist.filename} failed: {response.status_code} "
            f"{response.reason_phrase} {response.text[:300]}"
        )


async def _upload_one(client: httpx.AsyncClient, server: Server, dist: Dist) -> float:
    files = {"content": (dist.filename, dist.data, "application/octet-stream")}
    started = time.perf_counter()
    response = await client.post(server.upload_url, data=_form(dist), files=files)
    elapsed = time.perf_counter() - started
    _check_upload(server, dist, response)
    return elapsed


def upload_seconds(server: Server, dist: Dist) -> float:
    """One upload on a fresh connection (as one `twine upload` of one file makes)."""
    with httpx.Client(timeout=120, auth=server.auth, headers=server.headers) as client:
        files = {"content": (dist.filename, dist.data, "application/octet-stream")}
        started = time.perf_counter()
        response = client.post(server.upload_url, data=_form(dist), files=files)
        elapsed = time.perf_counter() - started
    _check_upload(server, dist, response)
    return elapsed


async def upload_all(
    server: Server, dists: list[Dist], concurrency: int
) -> tuple[float, list[float]]:
    """Upload every file with `concurrency` requests in flight; (wall seconds, latencies)."""
    queue: asyncio.Queue[Dist] = asyncio.Queue()
    for dist in dists:
        queue.put_nowait(dist)
    latencies: list[float] = []
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)

    async def worker(client: httpx.AsyncClient) -> None:
        while not queue.empty():
            dist = queue.get_nowait()
            latencies.append(await _upload_one(client, server, dist))

    started = time.perf_counter()
    async with httpx.AsyncClient(
        timeout=120, limits=limits, auth=server.auth, headers=server.headers
    ) as client:
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
    return time.perf_counter() - started, latencies


def get_seconds(server: Server, path: str) -> float:
    """GET one simple-index path on a fresh connection, as a new pip/uv process would."""
    host, port = server.simple_url.removeprefix("http://").split("/", 1)[0].split(":")
    started = time.perf_counter()
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    conn.request("GET", server.simple_path + path, headers={"Accept": PIP_ACCEPT})
    response = conn.getresponse()
    body = response.read()
    conn.close()
    elapsed = time.perf_counter() - started
    if response.status != 200 or not body:
        raise SystemExit(
            f"{server.label}: GET {server.simple_path}{path} answered {response.status}"
        )
    return elapsed


def interleaved(
    servers: list[Server], items: list[T], measure: Callable[[Server, T], float]
) -> dict[str, list[float]]:
    """Measure every item on every server, alternating which goes first, so that load from
    other processes on this machine falls on both servers alike."""
    results: dict[str, list[float]] = {server.label: [] for server in servers}
    for index, item in enumerate(items):
        order = servers if index % 2 == 0 else servers[::-1]
        for server in order:
            results[server.label].append(measure(server, item))
    return results


def uv_install_seconds(server: Server, dist: Dist, work: Path) -> float:
    """Wall time of `uv pip install --no-deps --no-cache` into a fresh virtualenv."""
    uv = str(BIN / "uv")
    venv = work / f"venv-{server.label}"
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(venv)], check=True)
    env = {key: value for key, value in os.environ.items() if not key.startswith(("UV_", "PIP_"))}
    command = [uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python"),
               "--no-deps", "--no-cache", "--no-config", "--index-url", server.simple_url,
               f"{dist.project}=={dist.version}"]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{server.label}: uv pip install failed:\n{done.stderr}")
    shutil.rmtree(venv)
    return elapsed


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time of process `pid` so far (Linux `/proc/PID/stat`, all threads).

    Sampled around the one-at-a-time uploads, it gives each server's CPU per upload: a figure
    that, unlike latency, hardly moves with the load of other processes on the machine."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


# --- report --------------------------------------------------------------------------------


@dataclass
class Row:
    metric: str
    values: dict[str, float]  # server label -> seconds
    unit: str

    def ratio(self, peer: str) -> float:
        return self.values["hub"] / self.values[peer] if self.values[peer] else float("inf")


def _fmt(value: float, unit: str) -> str:
    return f"{value * 1000:.2f} ms" if unit == "ms" else f"{value:.2f} s"


def render_table(rows: list[Row]) -> str:
    lines = [
        "| metric | hub | pypiserver | devpi | hub/pypiserver | hub/devpi |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        cells = " | ".join(_fmt(row.values[label], row.unit) for label in ("hub", *PEERS))
        ratios = " | ".join(f"{row.ratio(peer):.3f}" for peer in PEERS)
        lines.append(f"| {row.metric} | {cells} | {ratios} |")
    return "\n".join(lines)


def write_docs(table: str, args: argparse.Namespace, notes: list[str]) -> None:
    """Replace (or append) the `## Registry` section of docs/benchmarks.md, nothing else."""
    section = (
        "## Registry\n\n"
        f"`python scripts/bench_registry.py --projects {args.projects} --files-per-project "
        f"{args.files_per_project} --write-docs` on {datetime.now(UTC):%Y-%m-%d} "
        f"({platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} "
        "CPUs shared with other work; every server on 127.0.0.1, same data, same client code; "
        "ratios below 1.0 mean the hub is faster).\n\n"
        + table
        + "\n\n"
        + "\n".join(f"- {note}" for note in notes)
        + "\n"
    )
    write_section("## Registry", section)


@contextmanager
def running(work: Path, dists: list[Dist], devpi_bin: Path) -> Iterator[list[Server]]:
    """Every server, started before anything is measured and always stopped."""
    servers: list[Server] = []
    try:
        servers.append(start_hub(work))
        servers.append(start_pypiserver(work, dists))
        servers.append(start_devpi(work, devpi_bin))
        yield servers
    finally:
        for server in servers:
            server.stop()


def measure(args: argparse.Namespace, work: Path) -> dict[str, dict[str, float]]:
    rng = random.Random(args.seed)
    dists = generate(args.projects, args.files_per_project)
    fresh = generate(args.uploads, 1, prefix="fresh")
    megabytes = sum(len(d.data) for d in dists) / 1e6
    print(
        f"data set: {args.projects} projects, {len(dists)} wheels ({megabytes:.1f} MB)", flush=True
    )
    projects = sorted({d.project for d in dists})
    pages = [f"{rng.choice(projects)}/" for _ in range(args.page_requests)]
    targets = [rng.choice(dists) for _ in range(args.installs)]
    with running(work, dists, ensure_devpi(args.devpi_venv)) as servers:
        results: dict[str, dict[str, float]] = {server.label: {} for server in servers}
        for server in (servers[0], servers[2]):  # the hub and devpi are seeded over HTTP
            wall, _latencies = asyncio.run(upload_all(server, dists, args.concurrency))
            results[server.label]["seed"] = wall
            print(f"{server.label}: seeded {len(dists)} files over HTTP in {wall:.1f} s "
                  f"({len(dists) / wall:.0f} files/s, {args.concurrency} in flight, "
                  f"load {os.getloadavg()[0]:.1f})", flush=True)  # fmt: skip
        interleaved(servers, [f"{p}/" for p in projects[:10]], get_seconds)  # warm-up
        timings = {
            "page": interleaved(servers, pages, get_seconds),
            "index": interleaved(servers, [""] * args.index_requests, get_seconds),
        }
        cpu_before = {server.label: process_cpu_seconds(server.process.pid) for server in servers}
        timings["upload"] = interleaved(servers, fresh, upload_seconds)
        for server in servers:
            spent = process_cpu_seconds(server.process.pid) - cpu_before[server.label]
            results[server.label]["upload_cpu"] = spent / len(fresh)
        timings["install"] = interleaved(
            servers, targets, lambda server, d: uv_install_seconds(server, d, work)
        )
    for server in servers:
        mine = results[server.label]
        for key in ("page", "index", "upload"):
            mine[f"{key}_p50"] = pct(timings[key][server.label], 0.5)
            mine[f"{key}_p99"] = pct(timings[key][server.label], 0.99)
        mine["install"] = statistics.median(timings["install"][server.label])
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--projects", type=int, default=2000)
    parser.add_argument("--files-per-project", type=int, default=3)
    parser.add_argument(
        "--concurrency", type=int, default=8, help="uploads in flight while seeding"
    )
    parser.add_argument("--page-requests", type=int, default=300, help="project pages sampled")
    parser.add_argument("--index-requests", type=int, default=30, help="root index requests")
    parser.add_argument("--uploads", type=int, default=60, help="one-at-a-time uploads timed")
    parser.add_argument("--installs", type=int, default=5, help="uv installs per server")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--devpi-venv", type=Path, default=Path("/tmp/devpi-venv"))
    parser.add_argument("--quick", action="store_true", help="a smoke run (CI): tiny counts")
    parser.add_argument("--write-docs", action="store_true", help="update docs/benchmarks.md")
    args = parser.parse_args()
    if args.quick:
        args.projects, args.files_per_project, args.page_requests = 8, 2, 10
        args.index_requests, args.uploads, args.installs = 3, 4, 1
    if min(args.projects, args.files_per_project, args.page_requests, args.index_requests,
           args.uploads, args.installs) < 1:  # fmt: skip
        parser.error("every count must be at least 1")

    # SIGTERM unwinds like Ctrl-C, so both servers are stopped and the temp dir removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-registry-") as tmp:
        results = measure(args, Path(tmp))
    load_after = os.getloadavg()[0]
    hub, devpi = results["hub"], results["devpi"]
    files = args.projects * args.files_per_project

    def row(metric: str, key: str, unit: str = "ms") -> Row:
        return Row(metric, {label: results[label][key] for label in results}, unit)

    rows = [
        row("project page p50", "page_p50"),
        row("project page p99", "page_p99"),
        row("root index p50", "index_p50"),
        row("root index p99", "index_p99"),
        row("upload p50 (one at a time)", "upload_p50"),
        row("upload p99 (one at a time)", "upload_p99"),
        row("server CPU per upload (one at a time)", "upload_cpu"),
        row("uv pip install --no-deps (fresh venv, median)", "install", "s"),
    ]
    table = render_table(rows)
    print()
    print(table)
    worst = max(
        ((r, peer) for r in rows for peer in PEERS), key=lambda item: item[0].ratio(item[1])
    )
    upload = next(r for r in rows if r.metric.startswith("upload p50"))
    best = min(PEERS, key=lambda peer: upload.values[peer])
    print(
        f"\nupload p50 bar (<= the best peer): hub/{best} = {upload.ratio(best):.3f}, "
        f"{'met' if upload.ratio(best) <= 1.0 else 'NOT met'}"
        f"\nworst ratio: {worst[0].metric}, hub/{worst[1]} = {worst[0].ratio(worst[1]):.3f} "
        f"(target <= 1.0); load {load_before:.1f} at the start, {load_after:.1f} at the end"
    )
    notes = [
        (
            f"Seeding over HTTP, {files} uploads with {args.concurrency} in flight: hub "
            f"{hub['seed']:.0f} s ({files / hub['seed']:.0f} files/s), devpi {devpi['seed']:.0f} s "
            f"({files / devpi['seed']:.0f} files/s), hub/devpi {hub['seed'] / devpi['seed']:.2f}; "
            "pypiserver was seeded by copying the files into its directory (its single-threaded "
            "server timed out connections with 8 uploads in flight)."
        ),
        (
            "devpi-server 6 runs without devpi-web, without the root/pypi mirror, with "
            "`--offline-mode --keyfs-cache-size 100000`, a non-volatile index, and uploads "
            "authenticated by a login token (`X-Devpi-Auth`, as `devpi upload` sends it): a "
            "password on every upload would cost an argon2 hash per request."
        ),
        (
            "pypiserver 2.4 runs `--backend cached-dir --disable-fallback -a . -P .` (its "
            "fastest setup here); the hub runs `prime hub serve` (one uvicorn worker, SQLite "
            "WAL, local blobs) and validates every upload fully; project pages are requested "
            "with pip's `Accept` header (the hub answers PEP 691 JSON, pypiserver HTML)."
        ),
        (
            "Requests alternate between the servers so that load from other processes on "
            "the machine falls on all alike; p99 figures are noisy on a shared machine "
            f"(1-minute load average {load_before:.1f} at the start, {load_after:.1f} at the end)."
        ),
        (
            "pypiserver scans every file it holds to answer one project page "
            "(`find_project_packages`), so its project-page time grows with the index; the hub "
            "answers from an indexed database query and caches rendered pages."
        ),
        (
            "pypiserver runs on Bottle's `auto` server, which falls back to the stdlib "
            "`wsgiref` unless waitress or cheroot is installed; a threaded server would help "
            "its concurrency, not its per-request file scan."
        ),
    ]
    if args.write_docs:
        write_docs(table, args, notes)
        print("updated docs/benchmarks.md (## Registry)")


if __name__ == "__main__":
    main()
