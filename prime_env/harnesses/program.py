"""Run an external agent program as the harness.

The program gets `OPENAI_BASE_URL` / `OPENAI_API_KEY` for a per-rollout interception
endpoint (so any OpenAI-SDK agent works unchanged), the task on stdin as JSON
(`{"prompt": [...messages], "info": {...}}`, never the answer) and in `PRIME_PROMPT` (the last
user message's text). Every model call it makes is recorded into the rollout.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
from collections.abc import Mapping, Sequence
from typing import Any

from ..clients.base import ChatResponse, ModelClient, SamplingArgs
from ..errors import InfraError
from ..state import State
from .base import COMPLETED, Harness, Hook

PROGRAM_FAILED = "program_failed"
_OUTPUT_LIMIT = 64 * 1024


class Program(Harness):
    def __init__(
        self,
        cmd: str | Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
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
        self.env = dict(env or {})
        self.cwd = cwd

    async def run(self, client: ModelClient, state: State, sampling: SamplingArgs) -> None:
        async def generate(
            messages: list[dict[str, Any]], tools: Any, merged: SamplingArgs
        ) -> ChatResponse:
            _extend_transcript(state, messages)
            return await self.generate(client, state, merged, tools=tools)

        from .interception.server import InterceptionServer  # aiohttp: imported only when a program runs

        server = InterceptionServer(client, state, sampling, self.limit_reached, generate)
        base_url = await server.start()
        proc: asyncio.subprocess.Process | None = None
        try:
            try:
                proc = await asyncio.create_subprocess_exec(
                    *self.cmd,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    cwd=self.cwd,
                    env={
                        **os.environ,
                        **self.env,
                        "OPENAI_BASE_URL": base_url,
                        "OPENAI_API_KEY": server.secret,
                        "OPENAI_MODEL": client.model,
                        "PRIME_TASK_ID": state.task.id,
                        "PRIME_PROMPT": _last_user_text(state.prompt),
                    },
                    start_new_session=True,  # so the whole agent process tree can be killed
                )
            except OSError as exc:
                raise InfraError(
                    "program_start_failed", f"cannot start {self.cmd[0]!r}: {exc}"
                ) from exc
            task_json = json.dumps({"prompt": state.prompt, "info": state.task.info}).encode()
            communicate = asyncio.ensure_future(proc.communicate(task_json))
            stopped = asyncio.ensure_future(server.stopped.wait())
            await asyncio.wait({communicate, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if not communicate.done():
                _kill(proc)
            stdout, stderr = await communicate
            stopped.cancel()
            state["stdout"] = stdout[-_OUTPUT_LIMIT:].decode(errors="replace")
            state["stderr"] = stderr[-_OUTPUT_LIMIT:].decode(errors="replace")
            state["exit_code"] = proc.returncode
        finally:
            if proc is not None and proc.returncode is None:
                _kill(proc)
                await proc.wait()
            await server.close()
        if server.failure is not None:
            raise server.failure
        if server.stop_reason is not None:
            state.stop_reason = server.stop_reason
        else:
            state.stop_reason = COMPLETED if proc.returncode == 0 else PROGRAM_FAILED


def _kill(proc: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _key(message: dict[str, Any]) -> tuple[Any, ...]:
    return (
        message.get("role"),
        json.dumps(message.get("content") or "", sort_keys=True),
        message.get("tool_call_id"),
    )


def _extend_transcript(state: State, messages: list[dict[str, Any]]) -> None:
    """Add the messages the program sent since the last call (tool results, user turns).

    When the request continues the transcript we append only the new suffix; a program that
    starts a fresh context gets its whole request recorded, minus the task prompt.
    """
    transcript = state.prompt + state.completion
    keys = [_key(m) for m in transcript]
    request_keys = [_key(m) for m in messages]
    if request_keys[: len(keys)] == keys:
        new = messages[len(keys) :]
    else:
        prompt_keys = [_key(m) for m in state.prompt]
        start = len(prompt_keys) if request_keys[: len(prompt_keys)] == prompt_keys else 0
        new = messages[start:]
    state.completion.extend(dict(m) for m in new)


def _last_user_text(prompt: list[dict[str, Any]]) -> str:
    for message in reversed(prompt):
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else json.dumps(content)
    return ""
