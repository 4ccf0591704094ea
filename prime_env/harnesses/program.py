"""Run an external agent program as the harness, in a sandbox by default.

The program gets `OPENAI_BASE_URL`/`OPENAI_API_KEY` and `ANTHROPIC_BASE_URL`/
`ANTHROPIC_API_KEY` for the run's interception server (interception/server.py), so any
openai- or anthropic-SDK agent works unchanged, the task on stdin as JSON
(`{"prompt": [...messages], "info": {...}}`, never the answer) and in `PRIME_PROMPT` (the last
user message's text). Every model call it makes is recorded into the rollout.

`sandbox="auto"` (the default) runs it in a sandbox (Docker, else local) with no network: its
calls leave through the server's Unix socket, mounted in read-only, and a relay
(interception/relay.py) that gives it a loopback base URL. `binds` mounts host directories
read-only (its code, its dependencies). `sandbox="host"` runs it as a plain subprocess; the
`PRIME_PROGRAM_ON_HOST=1` environment variable (`--program-on-host`) does so for every Program.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
from collections.abc import Mapping, Sequence
from typing import Any

from ..clients.base import ModelClient, SamplingArgs
from ..errors import InfraError
from ..state import State
from .base import COMPLETED, Harness, Hook

PROGRAM_FAILED = "program_failed"
ON_HOST_VAR = "PRIME_PROGRAM_ON_HOST"
SANDBOXES = ("auto", "docker", "local", "host")
CHANNEL_DIR = "/prime/intercept"
"""Where a sandboxed program finds the server's socket and the relay."""
_OUTPUT_LIMIT = 64 * 1024


class Program(Harness):
    def __init__(
        self,
        cmd: str | Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        sandbox: str = "auto",
        image: str | None = None,
        binds: Mapping[str, str] | None = None,
        max_turns: int | None = None,
        max_tokens_total: int | None = None,
        timeout: float | None = 600.0,
        setup: Hook | None = None,
        cleanup: Hook | None = None,
    ) -> None:
        super().__init__(
            max_turns=max_turns,
            max_tokens_total=max_tokens_total,
            timeout=timeout,
            setup=setup,
            cleanup=cleanup,
        )
        self.cmd = shlex.split(cmd) if isinstance(cmd, str) else list(cmd)
        if not self.cmd:
            raise ValueError("Program needs a command to run")
        if sandbox not in SANDBOXES:
            raise ValueError(f"sandbox must be one of {', '.join(SANDBOXES)}, got {sandbox!r}")
        self.env = dict(env or {})
        self.cwd = cwd
        self.sandbox = sandbox
        self.image = image
        self.binds = dict(binds or {})
        from .interception.server import SharedServer  # aiohttp: imported only with a program

        self._server = SharedServer()

    @property
    def where(self) -> str:
        """Where the program runs: "host", or the sandbox backend asked for."""
        return "host" if os.environ.get(ON_HOST_VAR) == "1" else self.sandbox

    async def run(self, client: ModelClient, state: State, sampling: SamplingArgs) -> None:
        from .interception.server import Session

        session = Session(client, state, sampling, self.limit_reached, self.remaining_tokens)
        state["trace"] = session.graph
        async with self._server.session(session) as (server, secret):
            env = {
                **self.env,
                "OPENAI_API_KEY": secret,
                "ANTHROPIC_API_KEY": secret,
                "OPENAI_MODEL": client.model,
                "PRIME_TASK_ID": state.task.id,
                "PRIME_PROMPT": _last_user_text(state.prompt),
            }
            task_json = json.dumps({"prompt": state.prompt, "info": state.task.info}).encode()
            if self.where == "host":
                env["OPENAI_BASE_URL"], env["ANTHROPIC_BASE_URL"] = server.base_url, server.root_url
                code, stdout, stderr = await self._on_host(env, task_json, session.stopped)
            else:
                assert server.socket_dir is not None
                env["PRIME_INTERCEPT_SOCKET"] = f"{CHANNEL_DIR}/api.sock"
                binds = {**self.binds, str(server.socket_dir): CHANNEL_DIR}
                code, stdout, stderr = await self._in_sandbox(
                    env, binds, task_json, session.stopped
                )
        state["stdout"] = stdout[-_OUTPUT_LIMIT:].decode(errors="replace")
        state["stderr"] = stderr[-_OUTPUT_LIMIT:].decode(errors="replace")
        state["exit_code"] = code
        if session.failure is not None:
            raise session.failure
        if session.stop_reason is not None:
            state.stop_reason = session.stop_reason
        else:
            state.stop_reason = COMPLETED if code == 0 else PROGRAM_FAILED

    async def _on_host(
        self, env: dict[str, str], task_json: bytes, stopped: asyncio.Event
    ) -> tuple[int | None, bytes, bytes]:
        try:
            proc = await asyncio.create_subprocess_exec(
                *self.cmd,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=self.cwd,
                env={**os.environ, **env},
                start_new_session=True,  # so the whole agent process tree can be killed
            )
        except OSError as exc:
            raise InfraError(
                "program_start_failed", f"cannot start {self.cmd[0]!r}: {exc}"
            ) from exc
        try:
            communicate = asyncio.ensure_future(proc.communicate(task_json))
            stop = asyncio.ensure_future(stopped.wait())
            await asyncio.wait({communicate, stop}, return_when=asyncio.FIRST_COMPLETED)
            stop.cancel()
            if not communicate.done():
                _kill(proc)
            stdout, stderr = await communicate
            return proc.returncode, stdout, stderr
        finally:
            if proc.returncode is None:
                _kill(proc)
                await proc.wait()

    async def _in_sandbox(
        self,
        env: dict[str, str],
        binds: dict[str, str],
        task_json: bytes,
        stopped: asyncio.Event,
    ) -> tuple[int | None, bytes, bytes]:
        from sandbox import SandboxError, open_async_sandbox

        try:
            box = open_async_sandbox(self.sandbox, self.image, binds=binds)
            await box.start()
        except (SandboxError, ValueError) as exc:
            raise InfraError(
                "sandbox_unavailable", f"cannot start a sandbox for the program: {exc}"
            ) from exc
        run = asyncio.ensure_future(
            box.exec(
                ["python3", "-I", f"{CHANNEL_DIR}/relay.py", *self.cmd],
                stdin=task_json,
                env=env,
                cwd=self.cwd,
                timeout=(self.timeout or 24 * 3600.0) + 5.0,
            )
        )
        stop = asyncio.ensure_future(stopped.wait())
        try:
            await asyncio.wait({run, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            # A limit reached or the episode's timeout: the program stops with its sandbox,
            # and the exec that stopping interrupted is awaited, not left unread.
            stop.cancel()
            await box.stop()
            await asyncio.gather(run, return_exceptions=True)
        failure = None if run.cancelled() else run.exception()
        if run.cancelled() or failure is not None:
            if stopped.is_set():
                return None, b"", b""  # stopped at a limit: no output to keep
            raise failure or InfraError("sandbox_error", "the program's sandbox was stopped")
        result = run.result()
        if result.exit_code == 127 and result.stderr.startswith(b"relay: cannot start"):
            raise InfraError("program_start_failed", result.stderr.decode(errors="replace"))
        return result.exit_code, result.stdout, result.stderr


def _kill(proc: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _last_user_text(prompt: list[dict[str, Any]]) -> str:
    for message in reversed(prompt):
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else json.dumps(content)
    return ""
