"""Walks of a parsed JSON or TOML document for the readers that bound it (the hub's request
bodies, the CLI's TOML files): how deep it nests, and where a string holds a lone surrogate.
Iterative walks, since a recursive one is what a deep document is built to break."""

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


def lone_surrogate_at(value: Any) -> str | None:
    """The path (`samples[3].completion[0].content`) of the first string in `value`, key or
    value, that holds a lone surrogate (JSON's `"\\ud800"`), or None. Such a string is no
    Unicode text: it cannot be encoded as UTF-8, so a database or a page cannot store it."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if _has_surrogate(item):
                return path or "the body"
        elif isinstance(item, dict):
            for key, child in reversed(list(item.items())):
                where = f"{path}.{key}" if path else str(key)
                if isinstance(key, str) and _has_surrogate(key):
                    return f"a key of {path or 'the body'}"
                stack.append((child, where))
        elif isinstance(item, list):
            stack.extend((child, f"{path}[{i}]") for i, child in reversed(list(enumerate(item))))
    return None


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
