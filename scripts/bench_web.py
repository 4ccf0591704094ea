#!/usr/bin/env python
"""Web pages benchmark: p50 of the hub's pages against its own simplest JSON read, one run.

Builds a hub on 127.0.0.1 with N environments (default 2,000) published through the hub's own
`registry.publishing.publish_file` after the real upload validation (each with a Markdown
README and keyword tags), and one run of M samples (default 100,000) pushed over the REST API
as `prime eval push` does (create, batches of 5,000, finalize). Then it times, one request at a
time on a kept-alive connection, requests alternating between the kinds so that load from
other processes falls on all alike:

* the home page `/`, a full-text search `/?q=…`, an environment page `/{owner}/{name}`;
* pages of the run's samples viewer, `/{owner}/{name}/evals/{id}?page=N` at random N, and the
  same with a reward filter (`reward_min=0.9`);
* the baseline: the environment's JSON (`/api/v1/environmentshub/{owner}/{name}`), the hub's
  simplest read that touches the database, and `/healthz` for reference.

It prints p50/p90, each page's ratio to the JSON read's p50, the targets of issue 12 (home and
search <= 50 ms, environment page <= 60 ms, a samples page <= 100 ms) and the load; with
`--write-docs` it replaces the `## Web pages` section of docs/benchmarks.md. The samples viewer
indexes a run on its first view; that first view is timed on its own.

Quick mode (CI smoke run): `python scripts/bench_web.py --quick`.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
from sqlmodel import Session, select

from hub_server.accounts.models import Owner
from hub_server.admin import create_token, create_user, open_database
from hub_server.core.blobstore import BlobStore
from hub_server.core.settings import HubSettings
from hub_server.registry.publishing import EnvTarget, NewFile, publish_file
from registry_index.validation import UploadLimits, validate_distribution
from testing.benchmarks import serve_hub, stop_process, wheel_bytes, write_section

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
OWNER = "bench"
RUN_ENV = "maths-bench"
BATCH = 5000
TOPICS = ("arithmetic", "wordle", "retrieval", "coding", "reasoning", "games", "math", "tools")
README = """# {name}

A benchmark environment about **{topic}**. It asks {n} questions and scores each answer.

| field | meaning |
|---|---|
| `question` | the prompt shown to the model |
| `answer` | the reference answer |

```python
import prime_env
env = prime_env.load("{owner}/{name}")
```

- [x] deterministic rubric
- [ ] tool use
"""


# --- data ----------------------------------------------------------------------------------


def build_wheel(name: str, version: str, topic: str) -> tuple[str, bytes]:
    """A valid pure-Python wheel with a Markdown README and keywords (the page's tags)."""
    module = name.replace("-", "_")
    readme = README.format(name=name, topic=topic, n=len(name) * 10, owner=OWNER)
    metadata = (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        f"Summary: A {topic} environment for benchmarks ({name})\nRequires-Python: >=3.10\n"
        f"Keywords: {topic},bench\nDescription-Content-Type: text/markdown\n\n{readme}"
    )
    return wheel_bytes(
        module,
        version,
        {
            f"{module}/__init__.py": b"VALUE = 1\n",
            f"{module}-{version}.dist-info/METADATA": metadata.encode(),
        },
    )


def publish_environments(settings: HubSettings, names: list[str], scratch: Path) -> None:
    """Publish one wheel per name through the hub's own validation and publishing code."""
    engine = open_database(settings)
    store = BlobStore(settings.resolved_storage_url)
    with Session(engine, expire_on_commit=False) as session:
        owner = session.exec(select(Owner).where(Owner.name == OWNER)).one()
    limits = UploadLimits(max_file_size=settings.max_upload_bytes)
    for index, name in enumerate(names):
        filename, data = build_wheel(name, "1.0.0", TOPICS[index % len(TOPICS)])
        path = scratch / filename
        path.write_bytes(data)
        valid = validate_distribution(path, filename, limits)
        meta = valid.metadata
        new = NewFile(
            filename=filename,
            kind="wheel",
            sha256=valid.sha256,
            size=valid.size,
            version=str(meta.version),
            requires_python=meta.requires_python,
            summary=meta.summary or "",
            metadata_raw=meta.raw if valid.metadata_sha256 else None,
            metadata_sha256=valid.metadata_sha256,
            keywords=tuple(meta.keywords),
        )
        target = EnvTarget(owner=owner, name=name)
        publish_file(engine, store, target, new, path, owner.user_id or "")
    engine.dispose()


def push_run(base: str, token: str, samples: int) -> str:
    """Create → push in batches → finalize over the REST API, as `prime eval push` does."""
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base, headers=headers, timeout=300) as client:
        created = client.post(
            "/api/v1/evaluations/",
            json={
                "name": "bench-run",
                "environments": [{"slug": f"{OWNER}/{RUN_ENV}"}],
                "model_name": "bench-model",
                "is_public": True,
            },
        )
        _ok(created)
        run_id = str(created.json()["evaluation_id"])
        for start in range(0, samples, BATCH):
            batch = [_sample(i) for i in range(start, min(samples, start + BATCH))]
            _ok(client.post(f"/api/v1/evaluations/{run_id}/samples", json={"samples": batch}))
        _ok(client.post(f"/api/v1/evaluations/{run_id}/finalize", json={}))
    return run_id


def _sample(i: int) -> dict[str, object]:
    errored = i % 1000 == 999
    return {
        "example_index": i // 4,
        "rollout_index": i % 4,
        "reward": None if errored else (i % 10) / 10,
        "prompt": [{"role": "user", "content": f"What is {i // 4} + 1? Answer with a number."}],
        "completion": [{"role": "assistant", "content": f"The answer is {i // 4 + 1}."}],
        "error": {"type": "Timeout", "message": "took 60 s"} if errored else None,
    }


def _ok(response: httpx.Response) -> None:
    if response.status_code != 200:
        raise SystemExit(
            f"{response.request.url} answered {response.status_code}: {response.text[:300]}"
        )


# --- server --------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_hub(data_dir: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    env = {**os.environ, "PRIME_HUB_UPLOADS_PER_MINUTE": "1000000"}
    for key in ("PRIME_HUB_DATABASE_URL", "PRIME_HUB_STORAGE_URL"):
        env.pop(key, None)
    return serve_hub(data_dir, env, log, 90)


# --- measurement ---------------------------------------------------------------------------


def timed_get(client: httpx.Client, url: str) -> float:
    started = time.perf_counter()
    response = client.get(url)
    body = response.content
    elapsed = time.perf_counter() - started
    if response.status_code != 200 or not body:
        raise SystemExit(f"GET {url} answered {response.status_code}")
    return elapsed


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def measure(
    args: argparse.Namespace, work: Path
) -> tuple[dict[str, list[float]], dict[str, float]]:
    rng = random.Random(args.seed)
    settings = HubSettings(data_dir=work / "hub")
    engine = open_database(settings)
    create_user(engine, OWNER)
    token, _row = create_token(engine, OWNER, "bench-web")
    engine.dispose()
    names = [RUN_ENV] + [f"{TOPICS[i % len(TOPICS)]}-env-{i:05d}" for i in range(args.envs - 1)]
    scratch = work / "scratch"
    scratch.mkdir()
    started = time.perf_counter()
    publish_environments(settings, names, scratch)
    setup = {"publish": time.perf_counter() - started}
    print(f"published {len(names)} environments in {setup['publish']:.1f} s", flush=True)
    process, base = start_hub(settings.data_dir, work / "hub.log")
    try:
        started = time.perf_counter()
        run_id = push_run(base, token, args.samples)
        setup["push"] = time.perf_counter() - started
        print(f"pushed a {args.samples}-sample run in {setup['push']:.1f} s", flush=True)
        run_page = f"/{OWNER}/{RUN_ENV}/evals/{run_id}"
        pages = max(1, args.samples // 20)
        filtered_pages = max(
            1, (args.samples * 99 // 1000) // 20
        )  # reward 0.9: 1 in 10, minus errors
        kinds = {
            "JSON read (baseline)": lambda: f"/api/v1/environmentshub/{OWNER}/{rng.choice(names)}",
            "GET /healthz": lambda: "/healthz",
            "home page": lambda: "/",
            "search": lambda: f"/?q={rng.choice(TOPICS)}",
            "environment page": lambda: f"/{OWNER}/{rng.choice(names)}",
            "samples page": lambda: f"{run_page}?page={rng.randint(1, pages)}",
            "samples page, reward filter": lambda: (
                f"{run_page}?reward_min=0.9&page={rng.randint(1, filtered_pages)}"
            ),
        }
        timings: dict[str, list[float]] = {label: [] for label in kinds}
        with httpx.Client(base_url=base, timeout=120) as client:
            setup["first samples view"] = timed_get(client, run_page)  # indexes the run
            for pick in kinds.values():  # warm-up: templates compiled, caches filled once
                timed_get(client, pick())
            labels = list(kinds)
            for round_index in range(args.requests):
                order = labels if round_index % 2 == 0 else labels[::-1]
                for label in order:
                    timings[label].append(timed_get(client, kinds[label]()))
    finally:
        stop_process(process, 15)
    return timings, setup


# --- report --------------------------------------------------------------------------------

TARGETS = {
    "home page": 0.050,
    "search": 0.050,
    "environment page": 0.060,
    "samples page": 0.100,
    "samples page, reward filter": 0.100,
}


def render_table(timings: dict[str, list[float]]) -> tuple[str, list[str]]:
    baseline = pct(timings["JSON read (baseline)"], 0.5)
    lines = [
        "| request | p50 | p90 | p50 / JSON read p50 | target p50 | met |",
        "|---|---|---|---|---|---|",
    ]
    missed = []
    for label, values in timings.items():
        p50 = pct(values, 0.5)
        target = TARGETS.get(label)
        met = "" if target is None else ("yes" if p50 <= target else "**no**")
        if target is not None and p50 > target:
            missed.append(label)
        goal = f"<= {target * 1000:.0f} ms" if target else ""
        lines.append(
            f"| {label} | {p50 * 1000:.1f} ms | {pct(values, 0.9) * 1000:.1f} ms | "
            f"{p50 / baseline:.2f} | {goal} | {met} |"
        )
    return "\n".join(lines), missed


def write_docs(section_body: str) -> None:
    """Replace (or append) the `## Web pages` section of docs/benchmarks.md, nothing else."""
    write_section("## Web pages", "## Web pages\n\n" + section_body)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--envs", type=int, default=2000, help="environments published")
    parser.add_argument("--samples", type=int, default=100_000, help="samples in the run")
    parser.add_argument("--requests", type=int, default=60, help="requests timed per kind")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="a smoke run (CI): small sizes")
    parser.add_argument("--write-docs", action="store_true", help="update docs/benchmarks.md")
    args = parser.parse_args()
    if args.quick:
        args.envs, args.samples, args.requests = 40, 2000, 8
    if min(args.envs, args.samples, args.requests) < 1:
        parser.error("every count must be at least 1")

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-web-") as tmp:
        timings, setup = measure(args, Path(tmp))
    load_after = os.getloadavg()[0]
    table, missed = render_table(timings)
    verdict = "every target met" if not missed else "missed: " + ", ".join(missed)
    load = f"1-minute load average {load_before:.1f} at the start, {load_after:.1f} at the end"
    print()
    print(table)
    print(f"\n{verdict}; {load} ({os.cpu_count()} CPUs)")
    if args.write_docs:
        body = (
            f"`python scripts/bench_web.py --envs {args.envs} --samples {args.samples} "
            f"--requests {args.requests} --write-docs` on {datetime.now(UTC):%Y-%m-%d} "
            f"({platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} "
            f"CPUs shared with other work, {load}). One `prime hub serve` (one uvicorn worker, "
            "SQLite WAL, local blobs) on 127.0.0.1; one request at a time on a kept-alive "
            f"connection, {args.requests} per kind, kinds interleaved; the baseline is the "
            "environment's JSON from the REST API in the same run.\n\n" + table + "\n\n"
            f"- Data: {args.envs} environments published through the hub's upload validation "
            f"and `publish_file` ({setup['publish']:.0f} s), each with a Markdown README and "
            f"tags; one run of {args.samples} samples pushed over the API in batches of "
            f"{BATCH} ({setup['push']:.0f} s).\n"
            f"- The samples viewer indexes a run on its first view: "
            f"{setup['first samples view'] * 1000:.0f} ms for this run, once.\n"
            f"- {verdict}.\n"
        )
        write_docs(body)
        print("updated docs/benchmarks.md (## Web pages)")


if __name__ == "__main__":
    main()
