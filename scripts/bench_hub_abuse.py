#!/usr/bin/env python
"""Hostile-load benchmark of the hub (issue 9, item 2): does it hold, bounded, on loopback?

Starts a real hub (`prime hub serve`, one worker, SQLite + local blobs, TMPDIR inside its data
directory so spooled bodies count as its disk) on 127.0.0.1 and sends, one case at a time:

* an unauthenticated 1 GiB POST to /api/v1/environmentshub/resolve (Content-Length declared);
* an authenticated chunked 1 GiB POST to the same JSON route;
* a chunked 1 GiB /legacy/ upload with a read-only token, and one with an upload token;
* 8 concurrent PUTs of one 100 MiB upload URL (one may proceed, the others must be refused);
* reservations past the per-user quota;
* a 100,000-deep JSON eval sample;
* failed logins from one client rotating X-Forwarded-For.

Bodies are generated as they are sent and sending stops as soon as the hub answers, so a hub
that refuses early costs little; "sent" says how much went out before the answer. A sampler
thread reads the server's RSS (/proc) and the data directory's size every 50 ms. The run
prints each case's statuses and bytes sent, then the hub's idle and peak RSS (target: peak
within +100 MiB of idle), the peak disk use against the configured staged-bytes quota, and
whether every refusal was a 4xx (never a 5xx). Exit status 1 when a target is missed.

    .venv/bin/python scripts/bench_hub_abuse.py            # about a minute
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from sqlmodel import Session
from sqlmodel import select as sql_select

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hub_server.accounts.models import Owner
from hub_server.admin import create_token, create_user, open_database
from hub_server.core.settings import HubSettings
from hub_server.registry.models import Version
from hub_server.registry.publishing import create_environment
from testing.benchmarks import serve_hub, stop_process

MIB = 1024 * 1024
GIB = 1024 * MIB
RSS_BUDGET = 100 * MIB


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Sampler:
    """Peak RSS of one process and peak size of some directories, sampled in a thread."""

    pid: int
    dirs: list[Path]
    peak_rss: int = 0
    peak_disk: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def rss(self) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    def disk(self) -> int:
        total = 0
        for directory in self.dirs:
            for root, _dirs, files in os.walk(directory):
                for name in files:
                    try:
                        total += os.lstat(os.path.join(root, name)).st_size
                    except FileNotFoundError:
                        continue
        return total

    def run(self) -> None:
        while not self._stop.is_set():
            self.peak_rss = max(self.peak_rss, self.rss())
            self.peak_disk = max(self.peak_disk, self.disk())
            time.sleep(0.05)

    def start(self) -> None:
        threading.Thread(target=self.run, daemon=True).start()

    def stop(self) -> None:
        self._stop.set()


@dataclass
class Answer:
    status: int  # 0: the connection closed without an answer
    sent: int  # body bytes sent before the answer


def raw_request(
    port: int, method: str, path: str, headers: dict[str, str], body_size: int, *,
    chunked: bool = False, chunk: int = MIB, body_byte: bytes = b"x", prefix: bytes = b"",
) -> Answer:  # fmt: skip
    """Send a request whose body is generated as it goes (`prefix` first); stop at the hub's
    first answer."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.settimeout(60)
    head = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
    head += [f"{k}: {v}" for k, v in headers.items()]
    head.append("Transfer-Encoding: chunked" if chunked else f"Content-Length: {body_size}")
    sent = 0
    block = body_byte * chunk
    try:
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        while sent < body_size:
            readable, _, _ = select.select([sock], [], [], 0.2 if sent == 0 else 0)
            if readable:
                break
            part = block[: min(chunk, body_size - sent)]
            if sent == 0 and prefix:
                part = prefix + part[len(prefix) :]
            sock.sendall(f"{len(part):x}\r\n".encode() + part + b"\r\n" if chunked else part)
            sent += len(part)
        else:
            if chunked:
                sock.sendall(b"0\r\n\r\n")
        return Answer(_read_status(sock), sent)
    except (BrokenPipeError, ConnectionResetError):
        return Answer(_read_status(sock), sent)
    finally:
        sock.close()


def _read_status(sock: socket.socket) -> int:
    try:
        data = sock.recv(4096)
    except (ConnectionResetError, TimeoutError):
        return 0
    if not data.startswith(b"HTTP/1.1 "):
        return 0
    return int(data.split(b" ", 2)[1])


def basic(token: str) -> str:
    return "Basic " + base64.b64encode(f"__token__:{token}".encode()).decode()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", action="store_true", help="keep the hub's data directory")
    parser.add_argument(
        "--quick", action="store_true", help="CI smoke run: 4 PUTs of an 8 MiB upload URL"
    )
    args = parser.parse_args()
    puts_n, put_size = (4, 8 * MIB) if args.quick else (8, 100 * MIB)
    work = Path(tempfile.mkdtemp(prefix="bench-hub-abuse-"))
    data_dir, tmp = work / "hub", work / "tmp"
    tmp.mkdir()
    settings = HubSettings(data_dir=data_dir)
    engine = open_database(settings)
    create_user(engine, "alice")
    alice = create_token(engine, "alice", "all", ["all"])[0]
    alice_read = create_token(engine, "alice", "read", ["read"])[0]
    with Session(engine) as session:  # a published version to push eval results against
        owner = session.exec(sql_select(Owner).where(Owner.name == "alice")).one()
        env = create_environment(session, owner, "target", visibility="public")
        session.add(Version(environment_id=env.id, version="0.0.1", canonical_version="0.0.1"))
        session.commit()
    engine.dispose()
    server, url = serve_hub(data_dir, {**os.environ, "TMPDIR": str(tmp)}, work / "server.log", 120)
    port = int(url.rsplit(":", 1)[1])  # serve_hub's URL ends with its port
    results: list[tuple[str, list[int], str]] = []
    try:
        auth = {"Authorization": f"Bearer {alice}"}
        env_id = httpx.post(
            f"{url}/api/v1/environmentshub/resolve", headers=auth, json={"name": "target"}
        ).json()["data"]["id"]
        # Warm every route once so idle RSS includes imported code and caches.
        httpx.get(f"{url}/api/v1/evaluations/", headers=auth)
        httpx.get(f"{url}/alice/simple/", headers=auth)
        time.sleep(1.0)
        sampler = Sampler(server.pid, [data_dir, tmp])
        idle_rss, idle_disk = sampler.rss(), sampler.disk()
        sampler.start()

        def case(name: str, answers: list[Answer], note: str = "") -> None:
            sent = max((a.sent for a in answers), default=0)
            results.append((name, [a.status for a in answers], f"{note}sent≤{sent / MIB:.1f} MiB"))

        resolve = "/api/v1/environmentshub/resolve"
        json_type = {"Content-Type": "application/json"}
        case("unauthenticated 1 GiB POST /resolve",
             [raw_request(port, "POST", resolve, json_type, GIB)])  # fmt: skip
        case("authenticated chunked 1 GiB POST /resolve",
             [raw_request(port, "POST", resolve, {**json_type, **auth}, GIB, chunked=True)])  # fmt: skip
        multipart = {"Content-Type": "multipart/form-data; boundary=x"}
        case("chunked 1 GiB /legacy/, read-only token",
             [raw_request(port, "POST", "/legacy/", {**multipart, "Authorization": basic(alice_read)},
                          GIB, chunked=True)])  # fmt: skip
        file_part = (
            b'--x\r\nContent-Disposition: form-data; name="content"; '
            b'filename="target-0.1.0-py3-none-any.whl"\r\n\r\n'
        )
        case("chunked 1 GiB /legacy/ file, upload token",
             [raw_request(port, "POST", "/legacy/", {**multipart, "Authorization": basic(alice)},
                          GIB, chunked=True, prefix=file_part)])  # fmt: skip

        size = put_size
        digest = hashlib.sha256(b"\0" * size).hexdigest()
        reservation = httpx.post(
            f"{url}/api/v1/environmentshub/{env_id}/versions", headers=auth,
            json={"filename": "target-0.1.0.tar.gz", "sha256": digest, "size": size,
                  "semantic_version": "0.1.0"},
        ).json()["data"]  # fmt: skip
        put_path = "/" + reservation["upload_url"].split("/", 3)[3]
        with ThreadPoolExecutor(puts_n) as pool:
            puts = list(pool.map(
                lambda _: raw_request(port, "PUT", put_path, {}, size, body_byte=b"\0"),
                range(puts_n),
            ))  # fmt: skip
        case(f"{puts_n} concurrent PUTs of one {size // MIB} MiB upload URL", puts,
             f"{sum(a.status == 200 for a in puts)} accepted, ")  # fmt: skip

        quota = []
        for n in range(25):
            response = httpx.post(
                f"{url}/api/v1/environmentshub/{env_id}/versions", headers=auth,
                json={"filename": f"q-{n}.tar.gz", "sha256": "0" * 64, "size": size,
                      "semantic_version": f"1.{n}.0"},
            )  # fmt: skip
            quota.append(Answer(response.status_code, 0))
            if response.status_code == 429:
                break
        case("reservations until the per-user quota", [quota[-1]],
             f"{len(quota) - 1} reserved, ")  # fmt: skip

        run = httpx.post(
            f"{url}/api/v1/evaluations/",
            headers=auth,
            json={"name": "r", "environments": [{"slug": "alice/target"}], "model_name": "m"},
        )
        deep = "[" * 100_000 + "]" * 100_000
        body = '{"samples": [{"example_index": 0, "reward": 1, "info": ' + deep + "}]}"
        pushed = httpx.post(
            f"{url}/api/v1/evaluations/{run.json()['evaluation_id']}/samples",
            headers={**auth, **json_type}, content=body,
        )  # fmt: skip
        case("100,000-deep JSON eval sample", [Answer(pushed.status_code, len(body))])

        rotated = [
            httpx.get(
                f"{url}/api/v1/user/whoami",
                headers={"Authorization": "Bearer phub_guess", "X-Forwarded-For": f"127.9.{n}.1"},
            ).status_code
            for n in range(25)
        ]
        case("25 bad tokens rotating X-Forwarded-For", [Answer(s, 0) for s in rotated[-1:]],
             f"first 429 at #{rotated.index(429) + 1 if 429 in rotated else 'never'}, ")  # fmt: skip
        time.sleep(0.5)
        sampler.stop()
        settings_now = HubSettings(data_dir=data_dir)
    finally:
        stop_process(server, 15)

    statuses = [s for _name, answers, _note in results for s in answers]
    refusals = [s for s in statuses if s != 200]
    rss_growth = sampler.peak_rss - idle_rss
    disk_budget = settings_now.max_staged_bytes_per_user + settings_now.request_body_limit
    print(f"bench_hub_abuse: hub on 127.0.0.1, 1 worker, load {os.getloadavg()[0]:.1f} "
          f"({os.cpu_count()} CPUs)")  # fmt: skip
    print(f"{'case':48} {'statuses':28} notes")
    for name, answers, note in results:
        shown = ",".join(str(s) for s in sorted(set(answers)))
        print(f"{name:48} {shown:28} {note}")
    print(f"RSS idle {idle_rss / MIB:.0f} MiB, peak {sampler.peak_rss / MIB:.0f} MiB, "
          f"growth {rss_growth / MIB:+.0f} MiB (target ≤ +{RSS_BUDGET / MIB:.0f} MiB)")  # fmt: skip
    print(f"disk idle {idle_disk / MIB:.1f} MiB, peak {sampler.peak_disk / MIB:.1f} MiB "
          f"(quota: {settings_now.max_staged_bytes_per_user / MIB:.0f} MiB staged per user "
          f"+ one {settings_now.request_body_limit / MIB:.0f} MiB request)")  # fmt: skip
    all_4xx = all(400 <= s < 500 for s in refusals) and 0 not in statuses
    print(f"every refusal a 4xx (no 5xx, no dropped answer): {all_4xx}")
    if not args.keep:
        subprocess.run(["rm", "-rf", str(work)], check=False)
    ok = rss_growth <= RSS_BUDGET and sampler.peak_disk <= disk_budget and all_4xx
    print("targets met" if ok else "TARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
