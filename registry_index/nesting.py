"""How deep a parsed JSON or TOML document nests, for the readers that bound it (the hub's eval
uploads, the CLI's TOML files): one iterative walk, since a recursive one is what a deep
document is built to break."""

from __future__ import annotations

from typing import Any


def nests_deeper_than(value: Any, max_depth: int) -> bool:
    """Whether dicts and lists in `value` nest more than `max_depth` levels (the top is 1)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > max_depth:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False
