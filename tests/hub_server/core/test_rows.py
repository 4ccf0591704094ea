"""`core.rows.new_row`: a Core insert's values carry the model's defaults, as an ORM object would."""

from __future__ import annotations

from datetime import UTC
from typing import Any

import pytest

from hub_server.core.rows import new_row
from hub_server.registry.models import DistFile, Environment


def test_a_new_row_has_the_values_given_and_the_models_defaults() -> None:
    given: dict[str, Any] = {"owner_id": "o" * 32, "name": "Env", "normalized_name": "env"}
    row, other = new_row(Environment, **given), new_row(Environment, **given)
    orm = Environment(**given)
    assert row.keys() == orm.model_dump().keys()
    assert {k: row[k] for k in given} == given
    assert (row["visibility"], row["serial"], row["description"]) == ("public", 0, "")
    assert len(row["id"]) == 32 and row["id"] != other["id"]  # a fresh id per row
    assert row["created_at"].tzinfo == UTC


def test_a_new_row_refuses_a_missing_required_value_or_an_unknown_field() -> None:
    with pytest.raises(TypeError, match="size"):
        new_row(DistFile, environment_id="e", version_id="v", filename="f", kind="wheel",
                sha256="s", blob_key="k")  # fmt: skip
    with pytest.raises(TypeError, match="colour"):
        new_row(Environment, owner_id="o", name="n", normalized_name="n", colour="red")
