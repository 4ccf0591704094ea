"""An MCP server (the official SDK's MCPServer) with the tools the MCP tests drive.

    python mcp_calc_server.py                 # stdio
    python mcp_calc_server.py --http PORT     # streamable HTTP on 127.0.0.1:PORT/mcp

`add` works, `divide` reports a tool error for a zero divisor (the model's mistake), `crash`
kills the server (os._exit) and `hang` never answers: the last two are infrastructure failures.
"""

from __future__ import annotations

import argparse
import os
import time

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("calc")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def divide(a: float, b: float) -> float:
    """Divide a by b."""
    if b == 0:
        raise ToolError("division by zero: pick a non-zero divisor")
    return a / b


@server.tool()
def crash() -> str:
    """Stop the server abruptly."""
    os._exit(3)


@server.tool()
def hang() -> str:
    """Never answer."""
    time.sleep(3600)
    return "late"


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, default=None)
    args = parser.parse_args()
    if args.http is None:
        server.run()
    else:
        server.run("streamable-http", host="127.0.0.1", port=args.http)
