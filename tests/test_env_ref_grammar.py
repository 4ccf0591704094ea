"""The `owner/name@spec` grammar has one parser, registry_index.resolve: no module splits an
environment reference by hand, so a rule change (an owner rule, `@latest`, a specifier) cannot
miss a copy. Found by reading the code: any split on "@", and splits on "/" of a value whose
name says it is a reference (`slug`, `ref`, `env_id`, ...)."""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ALLOWED = {ROOT / "registry_index"}  # the grammar's home
SPLITS = {"partition", "rpartition", "split", "rsplit"}
REFERENCE = re.compile(r"(^|_)(slug|ref|env_id|env_ref|env_spec)s?($|_)|^env$")
SKIPPED_DIRS = {".git", ".venv", "__pycache__", "build", "dist", "node_modules"}


def _python_files() -> Iterator[Path]:
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS and not d.endswith(".egg-info")]
        if any(Path(folder).is_relative_to(allowed) for allowed in ALLOWED):
            continue
        yield from (Path(folder) / name for name in files if name.endswith(".py"))


def _receiver_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def hand_splits(source: str) -> list[int]:
    """Lines of `source` that take an environment reference apart without the parser."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in SPLITS
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            continue
        separator = node.args[0].value
        receiver = _receiver_name(node.func.value)
        if separator == "@" or (
            separator == "/" and receiver is not None and REFERENCE.search(receiver.lower())
        ):
            lines.append(node.lineno)
    return lines


def test_the_detector_finds_the_shapes_it_is_for() -> None:
    found = hand_splits(
        "owner, _, name = ref.slug.partition('/')\n"
        "name, _, pinned = name.partition('@')\n"
        "base = raw.split('@', 1)[0]\n"
        "owner = env_id.split('/')[0]\n"
        "provider, _, model = name.partition('/')\n"  # a model string, not a reference
        "path = url.split('/', 3)[3]\n"
    )
    assert found == [1, 2, 3, 4]


def test_no_hand_split_env_refs_outside_registry_index() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted(_python_files())
        if path != Path(__file__).resolve()
        for line in hand_splits(path.read_text())
    ]
    assert not found, (
        "these split an owner/name@spec reference by hand; use registry_index.resolve "
        f"(parse_env_id, parse_env_ref): {found}"
    )
