"""Column types shared by the hub's tables."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Dialect

E = TypeVar("E", bound=StrEnum)


class EnumText(sa.TypeDecorator[E]):
    """A StrEnum stored as its value in a VARCHAR (the schema is plain strings: no database
    enum type, no migration when a value is added); rows load as members of `enum`."""

    impl = sa.String
    cache_ok = True

    def __init__(self, enum: type[E], length: int) -> None:
        super().__init__(length)
        self.enum = enum

    def process_bind_param(self, value: Any, dialect: Dialect) -> str | None:
        return None if value is None else self.enum(value).value

    def process_result_value(self, value: Any, dialect: Dialect) -> E | None:
        return None if value is None else self.enum(value)
