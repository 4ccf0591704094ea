"""Plain Python functions as model tools.

The JSON schema comes from the signature (pydantic builds it from the annotations, so
Literal, Optional, lists and pydantic models all work) and the description from the
docstring (`docstring_parser` reads Google, NumPy, reST and Epydoc styles). The same
pydantic model validates the model's arguments, so a wrong call gets a precise message back.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Collection
from typing import Any, get_type_hints

import docstring_parser
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from .calling import call_user
from .errors import ToolCallError

ToolSpec = dict[str, Any]


def parse_arguments(arguments: str | dict[str, Any] | None) -> dict[str, Any]:
    """A tool call's arguments as the model sent them (JSON text, or already a dict) as a dict;
    ToolCallError, the model's mistake, when they are not a JSON object."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise ToolCallError(f"arguments are not valid JSON: {exc.msg}") from exc
    if not isinstance(arguments, dict):
        raise ToolCallError("arguments must be a JSON object")
    return arguments


class Tool:
    """A function exposed to the model. Parameters named in `hidden` are injected per rollout
    (e.g. a sandbox handle) and never appear in the schema the model sees."""

    def __init__(self, fn: Callable[..., Any], hidden: Collection[str] = ()) -> None:
        self.fn = fn
        self.name = fn.__name__
        signature = inspect.signature(fn)
        try:
            hints = get_type_hints(fn)
        except (NameError, TypeError):
            hints = {}
        doc = docstring_parser.parse(inspect.getdoc(fn) or "")
        param_docs = {p.arg_name: p.description for p in doc.params}
        self.hidden = {name for name in signature.parameters if name in hidden}
        fields: dict[str, Any] = {}
        for name, param in signature.parameters.items():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise TypeError(f"tool {self.name}: *args/**kwargs cannot be described to a model")
            if name in self.hidden:
                continue
            annotation = hints.get(name, Any)
            default = ... if param.default is param.empty else param.default
            fields[name] = (annotation, Field(default, description=param_docs.get(name)))
        self._args_model: type[BaseModel] = create_model(  # type: ignore[call-overload]
            f"{self.name}_args", __config__=ConfigDict(extra="forbid"), **fields
        )
        schema = self._args_model.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        description = "\n\n".join(
            part for part in (doc.short_description, doc.long_description) if part
        )
        self.spec: ToolSpec = {
            "type": "function",
            "function": {"name": self.name, "description": description, "parameters": schema},
        }

    async def call(self, arguments: str | dict[str, Any] | None, hidden: dict[str, Any]) -> str:
        """Validate the model's arguments, run the function (sync ones in a thread), return text."""
        arguments = parse_arguments(arguments)
        try:
            parsed = self._args_model.model_validate(arguments)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}"
                for err in exc.errors()
            )
            raise ToolCallError(f"invalid arguments for {self.name}: {problems}") from exc
        kwargs = {name: getattr(parsed, name) for name in type(parsed).model_fields}
        missing = self.hidden - hidden.keys()
        if missing:
            raise TypeError(
                f"tool {self.name} needs hidden argument(s) {sorted(missing)}; set them in the "
                "harness setup hook: state.tool_args[name] = value"
            )
        kwargs.update({name: hidden[name] for name in self.hidden})
        result = await call_user(self.fn, **kwargs)
        return result if isinstance(result, str) else json.dumps(result, default=str)


def tool_schema(fn: Callable[..., Any], hidden: Collection[str] = ()) -> ToolSpec:
    """The OpenAI tool spec for `fn` (hidden parameters left out)."""
    return Tool(fn, hidden).spec
