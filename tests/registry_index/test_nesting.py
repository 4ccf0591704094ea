"""The nesting bound the hub's JSON uploads and the CLI's TOML files share: exact at the
boundary, for dicts and lists alike, and iterative (a depth far past the recursion limit)."""

from __future__ import annotations

from typing import Any

from registry_index.nesting import nests_deeper_than


def nested(depth: int, kind: type) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"a": value} if kind is dict else [value]
    return value


def test_the_bound_is_exact_for_dicts_and_lists() -> None:
    for kind in (dict, list):
        assert not nests_deeper_than(nested(4, kind), 4)
        assert nests_deeper_than(nested(5, kind), 4)
    assert not nests_deeper_than("text", 1) and not nests_deeper_than({}, 1)


def test_a_document_deeper_than_the_recursion_limit_is_walked() -> None:
    assert nests_deeper_than(nested(100_000, list), 32)
