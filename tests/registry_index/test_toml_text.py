"""The one TOML reader of the CLI's files: a table, or one line saying what is wrong."""

from __future__ import annotations

import pytest

from registry_index.toml_text import MAX_DEPTH, TomlError, parse_toml

DEEP = {
    "nested arrays": "a = " + "[" * 100_000 + "]" * 100_000,
    "nested inline tables": "a = " + "{b = " * 5_000 + "1" + "}" * 5_000,
    "dotted table header": "[" + ".".join(["t"] * 5_000) + "]\nx = 1\n",
    "dotted keys": ".".join(["k"] * 5_000) + " = 1\n",
}


@pytest.mark.parametrize("text", DEEP.values(), ids=DEEP.keys())
def test_a_deeply_nested_document_is_one_clear_error(text: str) -> None:
    with pytest.raises(TomlError) as caught:
        parse_toml(text, "config.toml")
    message = str(caught.value)
    assert message.startswith("config.toml is nested more than") and "\n" not in message


def test_valid_invalid_and_undecodable_documents() -> None:
    nested = "a = " + "[" * (MAX_DEPTH - 1) + "1" + "]" * (MAX_DEPTH - 1)
    assert parse_toml(nested, "x")["a"]
    assert parse_toml(b"[hub]\nurl = 'http://h'\n", "x") == {"hub": {"url": "http://h"}}
    with pytest.raises(TomlError, match="x is not valid TOML"):
        parse_toml("a = = 1", "x")
    with pytest.raises(TomlError, match="x is not UTF-8"):
        parse_toml(b"a = '\xff'", "x")
