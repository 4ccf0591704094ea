"""PEP 503 normalisation and PEP 508 name validity, with property tests."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from packaging.utils import canonicalize_name

from registry_index.errors import InvalidUpload
from registry_index.names import (
    is_stdlib_name,
    is_valid_project_name,
    normalize,
    ultranormalize,
    validate_project_name,
)

names = st.from_regex(r"\A[A-Za-z0-9]([A-Za-z0-9._-]{0,30}[A-Za-z0-9])?\Z")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Foo.Bar", "foo-bar"),
        ("foo__bar", "foo-bar"),
        ("FOO-_.bar", "foo-bar"),
        ("wordle", "wordle"),
    ],
)
def test_normalize_examples(raw: str, expected: str) -> None:
    assert normalize(raw) == expected


@given(names)
def test_normalize_matches_packaging_and_is_idempotent(name: str) -> None:
    normal = normalize(name)
    assert normal == canonicalize_name(name)
    assert normalize(normal) == normal
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", normal)


@given(names, st.lists(st.sampled_from("-_."), min_size=1, max_size=3))
def test_separator_runs_collapse(name: str, run: list[str]) -> None:
    assert normalize(f"{name}{''.join(run)}x") == normalize(f"{name}-x")


@given(names)
def test_generated_names_are_valid(name: str) -> None:
    validate_project_name(name)
    assert is_valid_project_name(name)


@pytest.mark.parametrize("bad", ["", "-lead", "trail.", "sp ace", "uni\u00e9", "a/b", "x" * 129])
def test_invalid_names_explain_the_rule(bad: str) -> None:
    with pytest.raises(InvalidUpload, match=r"project name|not a valid project name"):
        validate_project_name(bad)
    assert not is_valid_project_name(bad)


@pytest.mark.parametrize(
    ("first", "second"),
    [("wordle", "w0rdle"), ("wordle", "Word-Le"), ("pillow", "p1ll0w"), ("mail", "ma1l")],
)
def test_confusable_names_share_an_ultranormal_form(first: str, second: str) -> None:
    assert ultranormalize(first) == ultranormalize(second)


def test_distinct_names_stay_distinct() -> None:
    assert ultranormalize("wordle") != ultranormalize("wordly")


@pytest.mark.parametrize(
    ("name", "reserved"), [("json", True), ("Asyncio", True), ("wordle", False)]
)
def test_stdlib_names(name: str, reserved: bool) -> None:
    assert is_stdlib_name(name) is reserved
