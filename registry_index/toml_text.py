"""The one TOML reader of the CLI's files (`config.toml`, `--endpoints` files, `prime train -c`
configs): text or bytes in, a table out, or a `TomlError` whose one-line message says which
file and what is wrong.

`tomllib` recurses once per level of nesting, so a deeply nested document (`a = [[[[…`)
raised RecursionError, a traceback, instead of a message; and a document that parses but
nests thousands of tables deep would recurse in whatever reads it next. Both are refused here
past `MAX_DEPTH` levels, as are bytes that are not UTF-8. Pure: callers do their own I/O.
"""

from __future__ import annotations

import tomllib
from typing import Any

from .nesting import nests_deeper_than

MAX_DEPTH = 32


class TomlError(ValueError):
    """A file that is not a TOML document the CLI reads; the message is one line."""


def parse_toml(text: str | bytes, what: str) -> dict[str, Any]:
    """`text` (a file's content; bytes must be UTF-8) as a table; `what` names it in errors."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise TomlError(f"{what} is not UTF-8 text (byte {exc.start})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TomlError(f"{what} is not valid TOML: {exc}") from None
    except RecursionError:
        raise TomlError(_too_deep(what)) from None
    if nests_deeper_than(data, MAX_DEPTH):
        raise TomlError(_too_deep(what))
    return data


def _too_deep(what: str) -> str:
    return f"{what} is nested more than {MAX_DEPTH} levels deep; no setting needs that many"
