"""Issue 26, class 4, under load: 64 concurrent downloads from a real `prime hub serve` (one
worker, SQLite) all answer 200, and an API read sent while they run is not starved. Before,
each download held two pool connections and 34 of 64 got a 500 after the 30 s pool timeout.

No absolute time is asserted: the burst and the read are compared with the same hub's idle
latencies measured first (a download and a read, one at a time). The 300-download figure is
`scripts/bench_downloads.py`'s (docs/security.md).
"""

from __future__ import annotations

import asyncio
import statistics
import time

import httpx

from tests.hub_server.hubproc import HubProcess
from tests.hub_server.wheels import twine_upload_form, wheel_bytes

CONCURRENCY = 64


async def _burst(hub: HubProcess, wheel: str, read: str) -> dict[str, list[float]]:
    limits = httpx.Limits(max_connections=CONCURRENCY + 4, max_keepalive_connections=0)
    times: dict[str, list[float]] = {
        "download": [],
        "read": [],
        "idle download": [],
        "idle read": [],
    }
    statuses: list[int] = []
    async with httpx.AsyncClient(base_url=hub.url, timeout=120, limits=limits) as client:

        async def get(path: str, kind: str) -> None:
            start = time.perf_counter()
            answer = await client.get(path)
            times[kind].append(time.perf_counter() - start)
            statuses.append(answer.status_code)

        for _ in range(10):  # the baselines: one request at a time on the idle hub
            await get(wheel, "idle download")
            await get(read, "idle read")
        done = asyncio.Event()

        async def reader() -> None:
            while not done.is_set():
                await get(read, "read")
                await asyncio.sleep(0.02)

        start = time.perf_counter()
        reading = asyncio.create_task(reader())
        await asyncio.gather(*(get(wheel, "download") for _ in range(CONCURRENCY)))
        times["burst"] = [time.perf_counter() - start]
        done.set()
        await reading
    assert set(statuses) == {200}, sorted(set(statuses))
    return times


def test_concurrent_downloads_get_no_5xx_and_do_not_starve_reads(fresh_hub: HubProcess) -> None:
    token = fresh_hub.add_user("dana")
    data = wheel_bytes("burst", "1.0.0", module_source="DATA = '" + "x" * 40_000 + "'\n")
    fields, files = twine_upload_form("burst", "1.0.0", data)
    uploaded = httpx.post(f"{fresh_hub.url}/dana/legacy/", auth=("__token__", token), data=fields,
                          files=files, timeout=60)  # fmt: skip
    assert uploaded.status_code == 200, uploaded.text
    times = asyncio.run(
        _burst(
            fresh_hub,
            "/dana/files/burst/burst-1.0.0-py3-none-any.whl",
            "/api/v1/environmentshub/dana/burst/@latest",
        )
    )
    # Served one after the other, the burst would take CONCURRENCY idle downloads; at once it
    # may take several times that on a shared host (4.3x in a loaded CI run), never the 30 s
    # pool timeout that the old code's starved requests waited for (about 90x).
    serial = CONCURRENCY * statistics.median(times["idle download"])
    budget = 10 * serial + 10 * statistics.median(times["idle read"])
    assert times["burst"][0] < budget, (times["burst"], serial)
    assert times["read"] and max(times["read"]) < budget, (max(times["read"]), serial)
    # Every download was counted, none with a connection of its own (written in a batch).
    deadline = time.monotonic() + 60
    while True:
        info = httpx.get(f"{fresh_hub.url}/api/v1/environmentshub/dana/burst").json()["data"]
        if info["downloads"] >= CONCURRENCY + 10 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert info["downloads"] == CONCURRENCY + 10
