"""prime_env never imports torch, transformers or local_model: the SDK every environment
installs stays light, and `local/` models reach it only through their entry point."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = {"torch", "transformers", "local_model"}


def _imported(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def test_prime_env_imports_no_torch_engine() -> None:
    found = {}
    for path in sorted((ROOT / "prime_env").rglob("*.py")):
        bad = {n for n in _imported(ast.parse(path.read_text())) if n.split(".")[0] in FORBIDDEN}
        if bad:
            found[str(path.relative_to(ROOT))] = sorted(bad)
    assert not found, f"prime_env must not import these (lazily or not): {found}"
