"""The base of every JSON request body the hub binds to a model: text must be Unicode.

JSON can carry a lone surrogate (`"\ud800"`), which no UTF-8 database column or page can hold:
a description PATCH or a pushed sample with one answered 500, after the change had reached
the session. Every request model refuses it before anything runs, naming the field (a 400).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, model_validator

from registry_index.nesting import lone_surrogate_at


def surrogate_problem(path: str) -> str:
    """The one sentence for a lone surrogate at `path` (model-bound and hand-parsed bodies)."""
    return (
        f"{path} holds a lone UTF-16 surrogate (such as \\ud800), which is not Unicode text; "
        "send valid text (pair the surrogate or remove it)"
    )


class RequestBody(BaseModel):
    """A request body: its strings (keys and values, at any depth) are Unicode text."""

    @model_validator(mode="before")
    @classmethod
    def _unicode_text(cls, data: Any) -> Any:
        path = lone_surrogate_at(data)
        if path is not None:
            raise ValueError(surrogate_problem(path))
        return data
