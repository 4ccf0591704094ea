"""The runner's side of an environment worker: its process, and connections to it.

`WorkerProcess.start` runs `prime_env/worker.py` with the environment's Python (its own
virtualenv) in a process group of its own, waits for its `READY` line, and reads its hello and tasks over a
blocking socket (an environment's tasks are known when it is loaded). Rollouts then use one
asyncio `Connection` per event loop, each carrying every request in flight. A worker that
exits, or a connection that breaks, fails every request waiting on it with an InfraError: the
rollouts become error records, never zeros.
"""

from __future__ import annotations

import asyncio
import atexit
import itertools
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from ..errors import EnvironmentNotFound, InfraError
from ..uv_binary import find_uv
from . import wire

WORKER = Path(__file__).resolve().parent.parent / "worker.py"
START_TIMEOUT_S = float(os.environ.get("PRIME_WORKER_START_TIMEOUT", "600"))
"""How long a worker may take to load its environment (verifiers imports in ~10 s on a quiet
core; a big taskset takes longer)."""
WORKER_DIED = "env_worker_died"


def _with_uv(path: str, bin_dir: Path) -> str:
    """PATH with this Python's uv first, alone in `bin_dir` (a link: nothing else of this
    virtualenv shadows the worker's own tools): verifiers runs its harness programs as PEP 723
    scripts with `uv`, and with none on PATH (a `prime` run from an unactivated virtualenv) it
    installs one itself (`pip install --user`, else a download from outside any registry)."""
    uv = find_uv()
    if uv is None:
        return path
    bin_dir.mkdir(exist_ok=True)
    link = bin_dir / "uv"
    if not link.is_symlink():
        link.symlink_to(uv)
    return os.pathsep.join([str(bin_dir), *(p for p in path.split(os.pathsep) if p)])


class WorkerProcess:
    """One environment worker started by this process (on this machine)."""

    def __init__(
        self,
        python: str,
        kind: str,
        env_id: str,
        env_args: dict[str, Any],
        *,
        extra_env: dict[str, str] | None = None,
    ) -> None:
        self.python = python
        self.kind = kind
        self.env_id = env_id
        self.env_args = env_args
        self.extra_env = dict(extra_env or {})
        self.address = ""
        self.hello: dict[str, Any] = {}
        self._proc: subprocess.Popen[bytes] | None = None
        self._dir = Path(tempfile.mkdtemp(prefix="prime-worker-"))
        self.log = self._dir / "worker.log"

    def start(self) -> WorkerProcess:
        """Start the worker and read its hello; EnvironmentNotFound (with the worker's own
        explanation) when it cannot load the environment."""
        env = {**os.environ, **self.extra_env, "PYTHONUNBUFFERED": "1"}
        env["PATH"] = _with_uv(env.get("PATH", ""), self._dir / "bin")
        with self.log.open("wb") as log:
            self._proc = subprocess.Popen(
                [
                    self.python, "-I", str(WORKER), "--kind", self.kind, "--env", self.env_id,
                    "--env-args", json.dumps(self.env_args),
                    "--listen", f"unix:{self._dir / 'worker.sock'}",
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env=env,
                cwd=self._dir,
                start_new_session=True,
            )  # fmt: skip
        atexit.register(self.stop)
        line = self._first_line()
        if line.startswith("READY "):
            self.address = line.split(" ", 1)[1].strip()
            self.hello = self._sync_request(None)
            if self.hello.get("protocol") != wire.PROTOCOL:
                self.stop()
                raise EnvironmentNotFound(
                    f"{self.env_id}: its worker speaks protocol {self.hello.get('protocol')}, "
                    f"this runner {wire.PROTOCOL}"
                )
            return self
        self.stop()
        if line.startswith("FAILED "):
            failure = json.loads(line.split(" ", 1)[1])
            raise EnvironmentNotFound(
                f"{self.env_id} ({self.kind}, in {self.python}) cannot be loaded: "
                f"{failure.get('type')}: {failure.get('message')}"
            )
        raise EnvironmentNotFound(
            f"{self.env_id}: its worker ({self.python}) exited before it was ready: "
            f"{self.log_tail() or 'no output'}"
        )

    def _first_line(self) -> str:
        assert self._proc is not None and self._proc.stdout is not None
        if not select.select([self._proc.stdout], [], [], START_TIMEOUT_S)[0]:
            return ""
        return self._proc.stdout.readline().decode(errors="replace")

    def log_tail(self, size: int = 2000) -> str:
        try:
            return self.log.read_bytes()[-size:].decode(errors="replace").strip()
        except OSError:
            return ""

    def exit_code(self) -> int | None:
        return None if self._proc is None else self._proc.poll()

    def request(self, op: str, **fields: Any) -> Any:
        """One request over a blocking connection of its own (loading, not rollouts)."""
        return self._sync_request({"id": 1, "op": op, **fields})

    def _sync_request(self, request: dict[str, Any] | None) -> Any:
        _kind, where, port = wire.parse_address(self.address)
        family = socket.AF_UNIX if _kind == "unix" else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.connect(where if _kind == "unix" else (where, port))
            with sock.makefile("rwb") as stream:
                hello = _read_frame(stream)
                if request is None:
                    return hello
                stream.write(wire.encode(request))
                stream.flush()
                reply = _read_frame(stream)
        if "error" in reply:
            error = reply["error"]
            raise InfraError(str(error.get("type")), str(error.get("message")))
        return reply.get("result")

    def stop(self) -> None:
        """Kill the worker and everything it started (its process group)."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
        if proc is not None:
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    stream.close()
        shutil.rmtree(self._dir, ignore_errors=True)

    def died(self) -> InfraError:
        code = self.exit_code()
        how = f"exited with status {code}" if code is not None else "closed its connection"
        tail = self.log_tail(600)
        return InfraError(
            WORKER_DIED,
            f"the worker of {self.env_id} {how}" + (f": {tail}" if tail else ""),
        )


def _read_frame(stream: Any) -> dict[str, Any]:
    head = stream.read(4)
    if len(head) < 4:
        raise InfraError(WORKER_DIED, "the environment worker closed the connection")
    data = stream.read(int.from_bytes(head, "big"))
    return dict(json.loads(data))


class Connection:
    """Requests to one worker from one event loop, answered in any order."""

    def __init__(self, worker: WorkerProcess) -> None:
        self.worker = worker
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._opened: asyncio.Future[None] | None = None
        self._broken: InfraError | None = None

    async def _open(self) -> None:
        try:
            reader, self._writer = await wire.open_connection(self.worker.address)
            await wire.read_message(reader)  # hello: known from the start
        except (OSError, wire.ProtocolError) as exc:
            raise self.worker.died() from exc
        self._reader_task = asyncio.ensure_future(self._read(reader))

    async def _read(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                reply = await wire.read_message(reader)
                if reply is None:
                    break
                future = self._pending.pop(int(reply.get("id") or 0), None)
                if future is None or future.done():
                    continue
                if "error" in reply:
                    error = reply["error"] or {}
                    future.set_exception(
                        InfraError(str(error.get("type")), str(error.get("message")))
                    )
                else:
                    future.set_result(reply.get("result"))
        except (OSError, wire.ProtocolError):
            pass
        await asyncio.sleep(0.05)  # let a dying worker's exit status be read
        self._broken = self.worker.died()
        for future in self._pending.values():
            if not future.done():
                future.set_exception(self._broken)
        self._pending.clear()

    async def request(self, op: str, **fields: Any) -> Any:
        if self._broken is not None:
            raise self._broken
        if self._opened is None:
            self._opened = asyncio.ensure_future(self._open())
        await asyncio.shield(self._opened)
        assert self._writer is not None
        request_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            self._writer.write(wire.encode({"id": request_id, "op": op, **fields}))
            await self._writer.drain()
        except OSError as exc:
            self._pending.pop(request_id, None)
            raise self.worker.died() from exc
        return await future

    async def close(self) -> None:
        if self._reader_task is not None:
            self._reader_task.cancel()
        if self._writer is not None:
            self._writer.close()
