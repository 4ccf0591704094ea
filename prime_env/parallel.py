"""One eval's rollouts in several worker processes, when one event loop is the limit.

At a few hundred rollouts in flight a single event loop is CPU-bound: every reply waits behind
the others' parsing, scoring and bookkeeping. `run_in_processes` forks `workers` children; each
runs `stream_rollouts` on its own loop over a share of the examples (all rollouts of one
example in the same child, so group rewards still see their whole group) with its share of the
concurrency, and writes each finished record as one JSON line to a pipe of its own. The parent
is the single writer of the run's results file: it reads whole lines from the pipes and hands
them to `on_line`, so the file is shared safely (no interleaved lines, at most the line being
written lost in a crash) and the running summary stays in the parent.

Children are forked, not spawned: a fork starts in milliseconds with the environment already
loaded (a spawned child re-imports and reloads it, seconds), which matters at the run's start.
They make their own model client with `client_factory` (connections are never shared across
processes), then wait for one another at a barrier before their first request: forks are
started one after another, and a child that began at once would run its first wave alone
while the next one is still being forked and set up (ramp-up the run pays for at the end,
as late rollouts). A child that never reaches the barrier (it failed) lets the others go
when the parent sees it exit (or after `_START_WAIT_S`). POSIX only.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Collection, Sequence
from typing import Any

from .clients.base import ModelClient, SamplingArgs
from .environment import Environment
from .process import event_loop
from .record import RolloutRecord
from .runner import choose_tasks, stream_rollouts
from .tasks import Task

ClientFactory = Callable[[], ModelClient]
_READ_CHUNK = 1 << 16
_START_WAIT_S = 60.0


def split(total: int, parts: int) -> list[int]:
    """`total` spread over `parts` as evenly as integers allow (concurrency per worker)."""
    return [total // parts + (k < total % parts) for k in range(parts)]


async def run_in_processes(
    env: Environment,
    client_factory: ClientFactory,
    *,
    workers: int,
    on_line: Callable[[bytes], None],
    n: int | None,
    r: int,
    concurrency: int,
    sampling: SamplingArgs,
    skip: Collection[tuple[int, int]],
    run_id: str,
    tasks: Sequence[Task] | None = None,
) -> None:
    """Run the rollouts `stream_rollouts` would, in `workers` forked processes; `on_line` gets
    each record's JSON line (without the newline) in the parent, as it arrives."""
    if workers < 2:
        raise ValueError("run_in_processes needs at least 2 workers")
    if concurrency < workers:
        raise ValueError(f"-c {concurrency} cannot be shared by {workers} worker processes")
    examples = len(choose_tasks(env, n, tasks))
    context = multiprocessing.get_context("fork")
    start = context.Barrier(workers)
    children: list[Any] = []
    readers: list[int] = []
    try:
        for k, share in enumerate(split(concurrency, workers)):
            read_fd, write_fd = os.pipe()
            child = context.Process(
                target=_child,
                name=f"prime-eval-worker-{k}",
                args=(env, client_factory, write_fd, read_fd, start),
                kwargs={
                    "n": n,
                    "r": r,
                    "concurrency": share,
                    "sampling": sampling,
                    "skip": skip,
                    "run_id": run_id,
                    "tasks": tasks,
                    "examples": range(k, examples, workers),
                },
                daemon=False,  # a daemonic process may not start processes of its own
            )
            child.start()
            os.close(write_fd)
            children.append(child)
            readers.append(read_fd)

        async def drain(fd: int) -> None:
            await _read_lines(fd, on_line)
            start.abort()  # this child is gone: whoever still waits for it must not wait on

        await asyncio.gather(*(drain(fd) for fd in readers))
        for child in children:
            await asyncio.to_thread(child.join)
        failed = [f"{c.name} (exit {c.exitcode})" for c in children if c.exitcode != 0]
        if failed:
            raise RuntimeError(
                f"worker process {', '.join(failed)} failed; its error is printed above. "
                "Finished rollouts are saved: rerun with --resume (and fewer --workers)."
            )
    finally:
        for child in children:
            if child.is_alive():
                child.terminate()
                child.join()


async def _read_lines(fd: int, on_line: Callable[[bytes], None]) -> None:
    """Whole lines from one child's pipe until it closes; a torn last line is dropped."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=_READ_CHUNK)
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", buffering=0)
    )
    try:
        tail = b""
        while chunk := await reader.read(_READ_CHUNK):
            *lines, tail = (tail + chunk).split(b"\n")
            for line in lines:
                on_line(line)
    finally:
        transport.close()


def _child(
    env: Environment,
    client_factory: ClientFactory,
    write_fd: int,
    read_fd: int,
    start: threading.Barrier,
    **kwargs: Any,
) -> None:
    """A worker process: its own event loop and client; records out as lines on `write_fd`."""
    os.close(read_fd)
    # The fork copied the parent's "a loop is running" marker (Python < 3.12 keeps it).
    asyncio.events._set_running_loop(None)
    # And its loop's SIGTERM handler (`prime eval run` stops resumably on SIGTERM): a no-op that
    # wakes the parent's loop, with which the parent's terminate() would not stop this worker.
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)

    def send(record: RolloutRecord) -> None:
        data = memoryview((record.to_json() + "\n").encode())
        while data:
            data = data[os.write(write_fd, data) :]

    async def main() -> None:
        client = client_factory()
        try:
            _wait_for_siblings(start)  # blocking is fine: nothing else runs on this loop yet
            await stream_rollouts(env, client, on_record=send, **kwargs)
        finally:
            await client.aclose()

    try:
        event_loop.run(main())
    except BaseException:  # noqa: BLE001 - a child reports any failure by its exit code
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
    os.close(write_fd)


def _wait_for_siblings(start: threading.Barrier) -> None:
    try:
        start.wait(_START_WAIT_S)
    except threading.BrokenBarrierError:
        pass  # a sibling failed before it was ready: go on, its failure is reported
