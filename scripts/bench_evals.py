#!/usr/bin/env python
"""Eval-results benchmark: pushing a large run to the hub, and reading leaderboards and pages.

One `prime hub serve` on 127.0.0.1 (SQLite + local blobs, a fresh temp directory). Measured,
each beside a baseline taken in the same run on the same machine:

* push: one run of N rollouts (~1 KiB each, 5% errored) created, pushed in 8 MiB batches (as
  `prime eval push` does) and finalized, in rollouts/s. Baseline: the floor of the same work
  without the hub, i.e. serialising the records to JSON, gzip-compressing them, writing them
  to a file and reading them back to compute the mean, in this process. Ratio = hub time /
  floor time (how much the HTTP API, validation, database and summary maths add).
* reads, with R finalized runs on one environment (R/4 models): p50/p99 of the leaderboard API
  and of the environment web page (README, versions, leaderboard), against the hub's simplest
  read of the same environment, `GET /api/v1/environmentshub/{owner}/{name}`. Ratios = ours /
  baseline.

Usage: `python scripts/bench_evals.py [--rollouts 50000] [--runs 200] [--write-docs]`.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from sqlmodel import Session, select

from hub_server.accounts.models import Owner
from hub_server.admin import create_token, create_user, open_database
from hub_server.core.settings import HubSettings
from hub_server.registry.models import Version
from hub_server.registry.publishing import create_environment
from testing.benchmarks import wait_until_up

BATCH_BYTES = 8 * 1024 * 1024
DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
SECTION = "## Eval results and leaderboards"


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def make_records(count: int, seed: int = 0) -> list[dict[str, Any]]:
    """Rollout records shaped like `prime eval run` output, ~1 KiB each, 5% errored."""
    rng = random.Random(seed)
    records = []
    for index in range(count):
        errored = rng.random() < 0.05
        records.append(
            {
                "run_id": "bench",
                "env": "bench/wordle@1.0.0",
                "task_id": f"t{index // 4}",
                "example_index": index // 4,
                "rollout_index": index % 4,
                "model": "bench-model",
                "prompt": [{"role": "user", "content": "Guess the word. " * 20}],
                "completion": [
                    {"role": "assistant", "content": f"<guess>{rng.random():.6f}</guess> " * 20}
                ],
                "answer": "crane",
                "reward": None if errored else rng.random(),
                "rewards": {} if errored else {"solved": rng.random()},
                "metrics": {"turns": rng.randint(1, 6)},
                "error": {"type": "RateLimitError", "message": "429"} if errored else None,
                "usage": {"prompt_tokens": 120, "completion_tokens": 80},
            }
        )
    return records


def batches(records: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    out: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] = []
    size = 0
    for record in records:
        length = len(json.dumps(record))
        if current and size + length > BATCH_BYTES:
            out.append(current)
            current, size = [], 0
        current.append(record)
        size += length
    if current:
        out.append(current)
    return out


def floor_seconds(records: list[dict[str, Any]], directory: Path) -> float:
    """Serialise, compress, write, read back and average: the work no design can skip."""
    start = time.perf_counter()
    path = directory / "floor.jsonl.gz"
    with gzip.open(path, "wt", compresslevel=6) as stream:
        for record in records:
            stream.write(json.dumps(record) + "\n")
    total, count = 0.0, 0
    with gzip.open(path, "rt") as stream:
        for line in stream:
            record = json.loads(line)
            if record["error"] is None:
                total += record["reward"]
                count += 1
    assert count > 0
    return time.perf_counter() - start


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return statistics.median(ordered), p99


def timed(call: Callable[[], httpx.Response], repeats: int) -> tuple[float, float]:
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        response = call()
        seconds.append(time.perf_counter() - start)
        response.raise_for_status()
    return percentiles(seconds)


def seed_hub(data_dir: Path) -> str:
    """A user `bench` with a token and a public environment bench/wordle 1.0.0."""
    engine = open_database(HubSettings(data_dir=data_dir))
    create_user(engine, "bench")
    token = create_token(engine, "bench", "bench")[0]
    with Session(engine) as session:
        owner = session.exec(select(Owner).where(Owner.name == "bench")).one()
        env = create_environment(session, owner, "wordle", visibility="public", description="bench")
        session.add(Version(environment_id=env.id, version="1.0.0", canonical_version="1.0.0"))
        session.commit()
    engine.dispose()
    return token


def push_run(client: httpx.Client, model: str, records: list[dict[str, Any]]) -> None:
    created = client.post(
        "/api/v1/evaluations/",
        json={
            "name": model,
            "environments": [{"slug": "bench/wordle"}],
            "model_name": model,
            "is_public": True,
        },
    )
    created.raise_for_status()
    evaluation_id = created.json()["evaluation_id"]
    for batch in batches(records):
        client.post(
            f"/api/v1/evaluations/{evaluation_id}/samples", json={"samples": batch}
        ).raise_for_status()
    client.post(f"/api/v1/evaluations/{evaluation_id}/finalize", json={}).raise_for_status()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rollouts", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-evals-") as tmp:
        root = Path(tmp)
        token = seed_hub(root / "hub")
        port = free_port()
        prime = Path(sys.executable).with_name("prime")
        log = (root / "hub.log").open("wb")
        server = subprocess.Popen(
            [str(prime), "hub", "serve", "--port", str(port), "--data-dir", str(root / "hub")],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PRIME_HUB_UPLOADS_PER_MINUTE": "1000000"},
        )
        url = f"http://127.0.0.1:{port}"
        try:
            wait_until_up(url, server, 60, root / "hub.log")
            headers = {"Authorization": f"Bearer {token}"}
            with httpx.Client(base_url=url, headers=headers, timeout=300) as client:
                records = make_records(args.rollouts)
                payload_mb = sum(len(json.dumps(r)) for r in records) / 1e6
                start = time.perf_counter()
                push_run(client, "big-run", records)
                push_s = time.perf_counter() - start
                floor_s = floor_seconds(records, root)

                small = make_records(40, seed=1)
                for index in range(args.runs):
                    push_run(client, f"model-{index % max(1, args.runs // 4)}", small)
                board = client.get("/api/v1/environmentshub/bench/wordle/leaderboard")
                board.raise_for_status()
                rows = len(board.json()["data"])
                leaderboard = timed(
                    lambda: client.get("/api/v1/environmentshub/bench/wordle/leaderboard"),
                    args.repeats,
                )
                page = timed(lambda: client.get("/bench/wordle"), args.repeats)
                baseline = timed(
                    lambda: client.get("/api/v1/environmentshub/bench/wordle"), args.repeats
                )
        finally:
            server.terminate()
            server.wait(30)
            log.close()

    ms = 1000.0
    lines = [
        SECTION,
        "",
        (
            f"`python scripts/bench_evals.py --rollouts {args.rollouts} --runs {args.runs}` on "
            f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, SQLite + local blobs, "
            "one uvicorn worker, client on the same machine; load average "
            f"{os.getloadavg()[0]:.1f} at the end (a shared machine: read the ratios, not the times)."
        ),
        "",
        "| measure | hub | baseline (same run) | ratio hub/baseline |",
        "|---|---|---|---|",
        (
            f"| push {args.rollouts:,} rollouts ({payload_mb:.0f} MB JSON, 8 MiB batches) + finalize | "
            f"{push_s:.2f} s ({args.rollouts / push_s:,.0f} rollouts/s) | {floor_s:.2f} s: JSON+gzip+write+read back, "
            f"no hub ({args.rollouts / floor_s:,.0f}/s) | {push_s / floor_s:.2f} |"
        ),
        (
            f"| leaderboard API, {args.runs} finalized runs, {rows} models, p50 / p99 | "
            f"{leaderboard[0] * ms:.1f} / {leaderboard[1] * ms:.1f} ms | "
            f"{baseline[0] * ms:.1f} / {baseline[1] * ms:.1f} ms: `GET /api/v1/environmentshub/bench/wordle` | "
            f"{leaderboard[0] / baseline[0]:.2f} / {leaderboard[1] / baseline[1]:.2f} |"
        ),
        (
            f"| environment web page (README, versions, leaderboard, recent runs), p50 / p99 | "
            f"{page[0] * ms:.1f} / {page[1] * ms:.1f} ms | same baseline | "
            f"{page[0] / baseline[0]:.2f} / {page[1] / baseline[1]:.2f} |"
        ),
        "",
        (
            "The push floor serialises and parses each record once; a push also serialises on the "
            "client, parses and validates on the hub and re-serialises each batch for its gzip blob, so "
            "a ratio near 2-3 is the cost of the API itself. Finalize merges the per-batch sums kept "
            "at push time, so it does not grow with the number of samples."
        ),
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.write_docs:
        existing = DOCS.read_text() if DOCS.exists() else "# Benchmarks\n"
        if SECTION in existing:
            head, _, rest = existing.partition(SECTION)
            tail = rest[rest.find("\n## ") + 1 :] if "\n## " in rest else ""
            existing = head.rstrip() + "\n\n" + text + ("\n" + tail if tail else "")
        else:
            existing = existing.rstrip() + "\n\n" + text
        DOCS.write_text(existing)


if __name__ == "__main__":
    main()
