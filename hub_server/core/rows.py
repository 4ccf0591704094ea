"""Column values for new rows written with Core statements instead of ORM objects.

The hot write paths (an upload's few rows) insert plain dicts: building a SQLModel object and
flushing it through the unit of work cost more than the insert itself. The defaults (ids,
timestamps, counters) still come from the model's fields, so each has one home.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from pydantic.fields import FieldInfo
from sqlmodel import SQLModel


@cache
def _fields(model: type[SQLModel]) -> tuple[tuple[str, FieldInfo], ...]:
    return tuple(model.model_fields.items())


def new_row(model: type[SQLModel], **values: Any) -> dict[str, Any]:
    """Every column of a new `model` row: `values`, and each other field's default."""
    row = {}
    for name, info in _fields(model):
        row[name] = values[name] if name in values else info.get_default(call_default_factory=True)
    unknown = values.keys() - row.keys()
    if unknown:
        raise TypeError(f"{model.__name__} has no field(s) {sorted(unknown)}")
    return row
