"""Token scopes: the one rule the hub's checks and the CLI's early refusal share."""

from __future__ import annotations

import pytest

from registry_index.scopes import (
    Scope,
    allows,
    canonical_scopes,
    parse_scope,
    upload_owners,
    writes_anything,
)


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("all", Scope("all")),
        ("read", Scope("read")),
        ("upload:alice", Scope("upload", "alice")),
        ("upload:acme/Word_Le", Scope("upload", "acme", "word-le")),
    ],
)
def test_parse_and_canonical_form(text: str, parsed: Scope) -> None:
    assert parse_scope(text) == parsed
    assert canonical_scopes([text]) == [str(parsed)]


@pytest.mark.parametrize(
    "junk", ["", "write", "upload:", "upload:Alice", "upload:a/", "upload:a/b/c"]
)
def test_junk_scopes_are_refused_with_the_grammar(junk: str) -> None:
    with pytest.raises(ValueError, match="upload:OWNER/NAME"):
        parse_scope(junk)


def test_what_each_scope_allows() -> None:
    assert canonical_scopes([]) == ["all"]
    assert allows(["all"], "write", "alice", "x")
    assert allows(["read"], "read", "alice", "x") and not allows(["read"], "write", "alice", "x")
    assert allows(["upload:alice"], "write", "alice", "x")
    assert allows(["upload:alice"], "read", "Alice")  # every environment of alice
    assert not allows(["upload:alice"], "write", "bob", "x")
    one = ["upload:alice/word-le"]
    assert allows(one, "write", "alice", "Word_Le") and not allows(one, "write", "alice", "x")
    assert not allows(one, "read", "alice")  # one environment is not all of alice's
    assert upload_owners(["read", "upload:b/x", "upload:a", "upload:b"]) == ["a", "b"]
    assert writes_anything(["read", "upload:a/x"]) and writes_anything(["all"])
    assert not writes_anything(["read"])
    assert writes_anything(["upload:a/x"], "a") and not writes_anything(["upload:a/x"], "b")
