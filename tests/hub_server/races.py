"""Races made to happen: another request's work run on the database at one chosen moment of
this one's, so a test sees that the rule holds when the two interleave."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, event


@contextmanager
def after_first_select(
    engine: Engine, naming: str, other: Callable[[], object]
) -> Iterator[list[bool]]:
    """Run `other` once, right after the first SELECT whose text holds `naming` runs on `engine`.

    Yields a list that holds True once `other` has run (a test asserts it did)."""
    fired: list[bool] = []

    def hook(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if not fired and statement.lstrip().upper().startswith("SELECT") and naming in statement:
            fired.append(True)
            other()

    event.listen(engine, "after_cursor_execute", hook)
    try:
        yield fired
    finally:
        event.remove(engine, "after_cursor_execute", hook)
