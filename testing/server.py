"""Run a fake provider in its own process, and a handle to start/steer/stop it from tests.

A separate process keeps the server off the test's (or the benchmark's) GIL, so measured
throughput is the client's, not a contention artefact.

    python -m testing.server --provider openai --port 8000 --latency-ms 200 \
        --fault 429=0.05 --fault drop=0.05 --seed 1

`FakeServer` starts it on port 0 and waits for the child's readiness line (`READY <port>` on a
pipe), so no port race and no fixed start deadline; a failed start kills the child.
"""

from __future__ import annotations

import argparse
import os
import select
import subprocess
import sys
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx

from prime_env.process.fd_table import reserve_fds
from testing.behaviour import FaultPlan
from testing.http_server import BACKLOG, serve, wait_forever
from testing.providers import FakeAnthropic, FakeOpenAI

_ROOT = Path(__file__).resolve().parents[1]


class FakeServer:
    """A fake provider subprocess on 127.0.0.1. Use as a context manager."""

    def __init__(
        self,
        provider: str = "openai",
        *,
        latency_ms: float = 0.0,
        faults: dict[str, float] | None = None,
        seed: int = 0,
        api_key: str | None = None,
        served_model: str | None = None,
    ) -> None:
        self.provider = provider
        self.port = 0  # chosen by the child (port 0) and reported in its readiness line
        self.api_key = api_key
        args = [
            sys.executable,
            "-m",
            "testing.server",
            "--provider",
            provider,
            "--port",
            "0",
            "--latency-ms",
            str(latency_ms),
            "--seed",
            str(seed),
        ]
        for name, rate in (faults or {}).items():
            args += ["--fault", f"{name}={rate}"]
        if api_key:
            args += ["--api-key", api_key]
        if served_model:
            args += ["--served-model", served_model]
        self._args = args
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The base URL a client is configured with (OpenAI's includes /v1, Anthropic's not)."""
        root = f"http://127.0.0.1:{self.port}"
        return root + "/v1" if self.provider == "openai" else root

    def start(self, timeout: float = 300.0) -> Self:
        """Start the child and wait for its readiness line (the port it bound).

        The wait ends on the signal, not on a guess: a loaded host only makes it longer, and
        `timeout` only bounds a child that hangs. Any failure kills the child, so a fake never
        outlives a failed start.
        """
        env = {**os.environ, "PYTHONPATH": str(_ROOT)}
        read_fd, write_fd = os.pipe()
        try:
            self._proc = subprocess.Popen(
                [*self._args, "--ready-fd", str(write_fd)], cwd=_ROOT, env=env, pass_fds=[write_fd]
            )
        finally:
            os.close(write_fd)
        try:
            with os.fdopen(read_fd, "rb") as ready:
                if not select.select([ready], [], [], timeout)[0]:
                    raise RuntimeError(f"fake server sent no readiness signal in {timeout} s")
                line = ready.readline().decode()
            if not line.startswith("READY "):
                code = self._proc.wait(timeout=5)
                raise RuntimeError(f"fake server exited with {code} before it was ready")
            self.port = int(line.split()[1])
            return self
        except BaseException:
            self.kill()
            raise

    def kill(self) -> None:
        """SIGKILL the child and reap it."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()

    @property
    def pid(self) -> int:
        assert self._proc is not None, "the server is not started"
        return self._proc.pid

    def configure(self, **plan: Any) -> dict[str, Any]:
        """Replace the fault plan (rates, script, seed, latency_ms, retry_after_s, hang_s)."""
        resp = httpx.post(f"http://127.0.0.1:{self.port}/_fake/config", json=plan, timeout=5)
        resp.raise_for_status()
        return dict(resp.json())

    def script_replies(self, replies: list[str]) -> None:
        """Answer the next len(replies) model requests with these texts, in arrival order."""
        resp = httpx.post(f"http://127.0.0.1:{self.port}/_fake/replies", json=replies, timeout=5)
        resp.raise_for_status()

    def stats(self) -> dict[str, Any]:
        resp = httpx.get(f"http://127.0.0.1:{self.port}/_fake/stats", timeout=5)
        resp.raise_for_status()
        return dict(resp.json())

    def arrivals(self) -> list[float]:
        """Monotonic arrival time of every model request since the last `configure`."""
        resp = httpx.get(f"http://127.0.0.1:{self.port}/_fake/arrivals", timeout=5)
        resp.raise_for_status()
        return [float(t) for t in resp.json()]

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.kill()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _parse_fault(text: str) -> tuple[str, float]:
    name, _, rate = text.partition("=")
    return name, float(rate)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--provider", choices=["openai", "anthropic"], default="openai")
    parser.add_argument("--port", type=int, required=True, help="0: any free port")
    parser.add_argument(
        "--ready-fd", type=int, default=None, help="write 'READY <port>' here once listening"
    )
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument(
        "--fault",
        action="append",
        default=[],
        type=_parse_fault,
        help="NAME=RATE, e.g. 429=0.05 (repeatable)",
    )
    parser.add_argument(
        "--script", default="", help="comma-separated faults for the first requests"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--api-key", default=None)
    parser.add_argument(
        "--served-model", default=None, help="the model name answers carry (default: the asked)"
    )
    args = parser.parse_args(argv)
    plan = FaultPlan(
        rates=dict(args.fault),
        script=[s for s in args.script.split(",") if s],
        seed=args.seed,
        latency_ms=args.latency_ms,
    )
    handler = (FakeOpenAI if args.provider == "openai" else FakeAnthropic)(
        plan, args.api_key, served_model=args.served_model
    )
    # Room for a benchmark's thousands of connections before any thread starts: a table grown
    # later stalls the server for an RCU grace period at its 256th and 512th (prime_env.process.fd_table).
    reserve_fds(BACKLOG)

    async def run() -> None:
        server = await serve(handler, "127.0.0.1", args.port)
        port = server.sockets[0].getsockname()[1]
        if args.ready_fd is not None:
            with os.fdopen(args.ready_fd, "w") as ready:
                ready.write(f"READY {port}\n")
        await wait_forever(server)

    try:
        import uvloop

        uvloop.run(run())
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
