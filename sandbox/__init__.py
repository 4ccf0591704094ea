"""Sandboxes for running untrusted, model-written code: Docker and a local fallback.

    from sandbox import open_sandbox, SandboxPool, SandboxError

    with open_sandbox() as sb:                      # backend="auto": Docker, else local
        result = sb.exec("python3 -c 'print(1)'", timeout=10)

    async with SandboxPool(size=4) as pool:         # warm sandboxes, one per rollout
        async with pool.acquire() as sb:
            result = await sb.exec(["python3", "main.py"], stdin="input")

A program's own failure (non-zero exit, killed for memory, timeout) is a normal `ExecResult`;
`SandboxError` means the sandbox itself failed and must be recorded as an error, not scored.
"""

from sandbox.aio import AsyncSandbox
from sandbox.backends.base import Sandbox
from sandbox.errors import SandboxError, SandboxUnavailable
from sandbox.factory import (
    list_sandboxes,
    open_async_sandbox,
    open_sandbox,
    reap_orphans,
    resolve_backend,
)
from sandbox.limits import DEFAULT_IMAGE, SandboxLimits
from sandbox.pool import SandboxPool
from sandbox.result import ExecResult

__all__ = [
    "DEFAULT_IMAGE",
    "AsyncSandbox",
    "ExecResult",
    "Sandbox",
    "SandboxError",
    "SandboxLimits",
    "SandboxPool",
    "SandboxUnavailable",
    "list_sandboxes",
    "open_async_sandbox",
    "open_sandbox",
    "reap_orphans",
    "resolve_backend",
]
