"""wiki-search's three tools served over MCP (stdio), for `load_environment(tools="mcp")`.

    python -m wiki_search.mcp_server [--corpus PATH] [--search-results N] [--snippet-chars N]

The same functions as the in-process tools (search.make_tools) on the same index; a bad id's
message reaches the model as the tool's error, as it does in-process.
"""

from __future__ import annotations

import argparse
import functools
import logging
from collections.abc import Callable
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from .corpus import load_corpus
from .search import SEARCH_RESULTS, SNIPPET_CHARS, SearchIndex, make_tools


def _reported(tool: Callable[..., str]) -> Callable[..., str]:
    """The tool, its ValueErrors raised as MCP tool errors (whose text the model sees)."""

    @functools.wraps(tool)
    def run(*args: Any, **kwargs: Any) -> str:
        try:
            return tool(*args, **kwargs)
        except ValueError as exc:
            raise ToolError(f"ValueError: {exc}") from exc

    return run


def build_server(
    corpus: str | None = None,
    search_results: int = SEARCH_RESULTS,
    snippet_chars: int = SNIPPET_CHARS,
) -> MCPServer:
    # The server's stderr is the user's terminal: no library's debug lines there.
    server = MCPServer("wiki-search", log_level="WARNING")
    logging.getLogger("bm25s").setLevel(logging.WARNING)
    for tool in make_tools(SearchIndex(load_corpus(corpus)), search_results, snippet_chars):
        server.add_tool(_reported(tool))
    return server


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--corpus", default=None, help="a directory or .jsonl (default: Wikipedia)")
    parser.add_argument("--search-results", type=int, default=SEARCH_RESULTS)
    parser.add_argument("--snippet-chars", type=int, default=SNIPPET_CHARS)
    args = parser.parse_args()
    build_server(args.corpus, args.search_results, args.snippet_chars).run()
