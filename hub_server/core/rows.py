"""Core statements over the hub's tables: the table of a model, and column values for new rows
written with Core statements instead of ORM objects.

The hot write paths (an upload's few rows) insert plain dicts: building a SQLModel object and
flushing it through the unit of work cost more than the insert itself. The defaults (ids,
timestamps, counters) still come from the model's fields, so each has one home.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any, cast

import sqlalchemy as sa
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined
from sqlmodel import SQLModel

_IMMUTABLE = (type(None), bool, int, float, str, bytes)


def _maker(info: FieldInfo) -> Callable[[], Any]:
    """A function giving the field's default: its factory or its immutable value as such
    (through pydantic's `get_default` these cost three times the insert's other work), else
    pydantic's own answer."""
    factory = info.default_factory
    if factory is not None and not info.default_factory_takes_validated_data:
        return cast(Callable[[], Any], factory)
    if factory is None and isinstance(info.default, _IMMUTABLE):
        default = info.default
        return lambda: default
    return lambda: info.get_default(call_default_factory=True)


@cache
def _makers(model: type[SQLModel]) -> tuple[tuple[str, Callable[[], Any]], ...]:
    return tuple((name, _maker(info)) for name, info in model.model_fields.items())


def new_row(model: type[SQLModel], **values: Any) -> dict[str, Any]:
    """Every column of a new `model` row: `values`, and each other field's default."""
    row = {name: values[name] if name in values else make() for name, make in _makers(model)}
    missing = [name for name, value in row.items() if value is PydanticUndefined]
    unknown = values.keys() - row.keys()
    if missing or unknown:
        raise TypeError(f"{model.__name__}: no value for {missing}, no field {sorted(unknown)}")
    return row


def table_of(model: type[SQLModel]) -> sa.Table:
    """The Core table behind a SQLModel table class (for statements built once, at import)."""
    table = sa.inspect(model).local_table
    assert isinstance(table, sa.Table)
    return table
