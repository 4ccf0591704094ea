"""The hub client is a library below the CLI: it imports neither `prime_cli` nor rich, at any
level (lazy imports included), so it prints nothing of its own."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def imported(path: Path) -> set[str]:
    """The top-level package of every module `path` imports, wherever the import stands."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return found


def test_hub_client_imports_neither_the_cli_nor_rich() -> None:
    sources = sorted((ROOT / "hub_client").rglob("*.py"))
    assert sources
    offending = {
        str(path.relative_to(ROOT)): sorted(imported(path) & {"prime_cli", "rich"})
        for path in sources
    }
    assert {path: names for path, names in offending.items() if names} == {}
