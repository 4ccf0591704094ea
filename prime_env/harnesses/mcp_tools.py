"""Tools served by MCP servers, through the official `mcp` SDK (stdio and streamable HTTP).

`MCPTools(command=[...])` starts a server as a subprocess and talks over its stdin/stdout;
`MCPTools(url="http://…/mcp")` connects to a running streamable-HTTP server. With
`shared=True` (the default) one connection serves every rollout of a run (started on first
use, on the run's event loop); `shared=False` starts one per rollout and stops it afterwards.
The server's tools reach the model as ordinary tool specs, so each client converts them to its
own wire format (OpenAI `tools`, Anthropic `input_schema`).

What is whose fault: a tool's own error (`isError` results, invalid arguments, an unknown
tool) goes back to the model as the tool message; a server that cannot start, crashes or
does not answer within `timeout` is the rollout's infrastructure error (`InfraError`), never
a reward.
"""

from __future__ import annotations

import asyncio
import json
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from ..clients.base import ToolSpec
from ..errors import InfraError, ToolCallError
from ..tools import parse_arguments

# JSON-RPC codes a server may answer for a call the model got wrong (not the server's failure).
_MODEL_ERROR_CODES = frozenset({-32602})  # invalid params


class MCPTools:
    """Where an environment's tools come from: one MCP server, by command or by URL."""

    def __init__(
        self,
        command: str | Sequence[str] | None = None,
        *,
        url: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        shared: bool = True,
        timeout: float = 60.0,
        start_timeout: float = 120.0,
        name: str | None = None,
    ) -> None:
        if (command is None) == (url is None):
            raise ValueError("MCPTools needs exactly one of command=[...] (stdio) or url= (HTTP)")
        self.argv = shlex.split(command) if isinstance(command, str) else list(command or [])
        if command is not None and not self.argv:
            raise ValueError("MCPTools: the server command is empty")
        self.url = url
        self.env = dict(env or {})
        self.cwd = cwd
        self.shared = shared
        self.timeout = timeout
        self.start_timeout = start_timeout
        self.name = name or (url if url is not None else self.argv[0])
        self._shared: dict[asyncio.AbstractEventLoop, MCPConnection] = {}
        self._opening: dict[asyncio.AbstractEventLoop, asyncio.Task[MCPConnection]] = {}

    def __repr__(self) -> str:
        return f"MCPTools({self.name!r}, shared={self.shared})"

    async def connect(self) -> MCPConnection:
        """The connection a rollout uses: the run's shared one (restarted if it died), or a new
        one that the caller closes."""
        if not self.shared:
            return await MCPConnection.open(self)
        loop = asyncio.get_running_loop()
        live = self._shared.get(loop)
        if live is not None and live.alive:
            return live
        opening = self._opening.get(loop)
        if opening is None or opening.done() and (live is None or not live.alive):
            opening = self._opening[loop] = loop.create_task(MCPConnection.open(self))
        connection = await asyncio.shield(opening)
        self._shared[loop] = connection
        return connection


class MCPConnection:
    """One live MCP client session, owned by a task of its own: the SDK's anyio scopes must be
    entered and left in one task, while rollouts call tools from theirs."""

    def __init__(self, source: MCPTools) -> None:
        self.source = source
        self.tools: list[ToolSpec] = []
        self.names: set[str] = set()
        self._client: Any = None
        self._ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._closing = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._broken = False

    @classmethod
    async def open(cls, source: MCPTools) -> MCPConnection:
        connection = cls(source)
        connection._task = asyncio.get_running_loop().create_task(connection._run())
        try:
            await asyncio.wait_for(asyncio.shield(connection._ready), source.start_timeout)
        except TimeoutError:
            await connection.close()
            raise InfraError(
                "mcp_server_unavailable",
                f"MCP server {source.name} did not answer within {source.start_timeout:g} s",
            ) from None
        return connection

    @property
    def alive(self) -> bool:
        return self._task is not None and not self._task.done() and not self._broken

    async def _run(self) -> None:
        try:
            from mcp import Client, StdioServerParameters
        except ImportError as exc:
            self._fail(
                InfraError(
                    "mcp_unavailable",
                    f"MCP tools need the mcp package: pip install 'prime-envhub-sdk[mcp]' ({exc})",
                )
            )
            return
        source = self.source
        server: Any = source.url
        if server is None:
            server = StdioServerParameters(
                command=source.argv[0], args=source.argv[1:], env=source.env or None, cwd=source.cwd
            )
        try:
            async with Client(server, read_timeout_seconds=source.timeout) as client:
                listed = await client.list_tools()
                self.tools = [_tool_spec(tool) for tool in listed.tools]
                self.names = {spec["function"]["name"] for spec in self.tools}
                self._client = client
                if not self._ready.done():
                    self._ready.set_result(None)
                await self._closing.wait()
        except BaseException as exc:  # any failure of the server is the rollout's infrastructure
            self._fail(
                InfraError(
                    "mcp_server_unavailable",
                    f"MCP server {source.name} failed: {_describe(exc)}",
                )
            )
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self._client = None

    def _fail(self, error: InfraError) -> None:
        if not self._ready.done():
            self._ready.set_exception(error)
            self._ready.exception()  # retrieved: `open` re-raises it, or nobody waits any more

    async def call(self, name: str, arguments: str | dict[str, Any] | None) -> str:
        """Run tool `name`; the model's mistakes raise ToolCallError, the server's InfraError."""
        arguments = parse_arguments(arguments)
        client = self._client
        if client is None or not self.alive:
            raise InfraError("mcp_server_crashed", f"MCP server {self.source.name} is not running")
        from mcp import MCPError

        try:
            result = await client.call_tool(name, arguments)
        except MCPError as exc:
            if exc.code in _MODEL_ERROR_CODES:
                raise ToolCallError(str(exc)) from exc
            await self._break()
            kind = "mcp_server_timeout" if "timed out" in str(exc) else "mcp_server_crashed"
            raise InfraError(kind, f"MCP server {self.source.name}: {exc}") from exc
        except Exception as exc:  # the transport broke: infrastructure
            await self._break()
            raise InfraError(
                "mcp_server_crashed", f"MCP server {self.source.name}: {_describe(exc)}"
            ) from exc
        text = _result_text(result)
        if result.is_error:
            raise ToolCallError(text or f"tool {name} failed")
        return text

    async def _break(self) -> None:
        """Stop a server that crashed or hung before its rollout's error is raised; the next
        rollout of a run gets a fresh one. A shutdown left running could be cut short by the
        end of the run's event loop, which orphans a hung server and blocks the loop's close."""
        self._broken = True
        await self.close()

    async def close(self) -> None:
        """Stop the server and wait until it is gone. `asyncio.wait`, not `gather`: a caller
        cancelled meanwhile must not cancel the shutdown itself."""
        self._closing.set()
        if self._task is not None:
            await asyncio.wait({self._task})


def _tool_spec(tool: Any) -> ToolSpec:
    schema = dict(tool.input_schema or {"type": "object", "properties": {}})
    schema.pop("title", None)
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": (tool.description or "").strip(),
            "parameters": schema,
        },
    }


def _result_text(result: Any) -> str:
    parts = []
    for block in result.content or []:
        if getattr(block, "type", "") == "text":
            parts.append(block.text)
        else:
            parts.append(f"[{getattr(block, 'type', 'content')}]")
    if not parts and result.structured_content is not None:
        return json.dumps(result.structured_content)
    return "\n".join(parts)


def _describe(exc: BaseException) -> str:
    """The innermost messages of an exception group (the SDK's task groups wrap failures)."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(inner) for inner in exc.exceptions)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
