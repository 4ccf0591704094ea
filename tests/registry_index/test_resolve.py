"""`owner/name[@spec]` parsing and installer-compatible version selection."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from packaging.utils import canonicalize_name
from packaging.version import Version

from registry_index.errors import InvalidEnvRef
from registry_index.resolve import (
    EnvRef,
    latest_version,
    parse_env_id,
    parse_env_ref,
    select_version,
)

owners = st.from_regex(r"\A[A-Za-z0-9]([A-Za-z0-9-]{0,10}[A-Za-z0-9])?\Z")
names = st.from_regex(r"\A[A-Za-z0-9]([A-Za-z0-9._-]{0,20}[A-Za-z0-9])?\Z")
versions = st.builds(
    lambda a, b, c: f"{a}.{b}.{c}", *(st.integers(min_value=0, max_value=99) for _ in range(3))
)


@given(owners, names, st.one_of(st.none(), versions))
def test_roundtrip(owner: str, name: str, version: str | None) -> None:
    text = f"{owner}/{name}" + (f"@{version}" if version else "")
    ref = parse_env_ref(text)
    assert ref.owner == owner.lower()  # owners are case-insensitive
    assert ref.name == canonicalize_name(name)
    assert ref.spec == version
    assert parse_env_ref(str(ref)) == ref


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("alice/Wordle", EnvRef("alice", "wordle")),
        ("alice/wordle@latest", EnvRef("alice", "wordle")),
        ("alice/wiki_search@>=1.2,<2", EnvRef("alice", "wiki-search", ">=1.2,<2")),
        (" alice/wordle@==1.0 ", EnvRef("alice", "wordle", "==1.0")),
    ],
)
def test_examples(text: str, expected: EnvRef) -> None:
    assert parse_env_ref(text) == expected


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("a/b/c", "OWNER/NAME"),
        ("/wordle", "not a valid owner"),
        ("al ice/wordle", "not a valid owner"),
        ("al_ice/wordle", "not a valid owner"),  # the hub's owner rule: no '_'
        ("wordle", "has no owner"),
        ("alice/", "not a valid environment name"),
        ("alice/wor dle", "not a valid environment name"),
        ("alice/wordle@", "empty version"),
        ("alice/wordle@banana!", "neither a version nor a version specifier"),
    ],
)
def test_bad_refs(text: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        parse_env_ref(text)


@pytest.mark.parametrize("text", ["a/b/c", "al_ice/wordle", "alice/", "alice/wordle@banana!"])
def test_a_bad_ref_is_an_invalid_env_ref(text: str) -> None:
    with pytest.raises(InvalidEnvRef):
        parse_env_id(text)


def test_one_error_type_for_the_grammar_wherever_it_is_read() -> None:
    with pytest.raises(InvalidEnvRef, match="has no owner"):
        parse_env_ref("wordle")
    with pytest.raises(InvalidEnvRef, match="neither a version"):
        select_version([(Version("1.0"), False)], "banana!")
    assert issubclass(InvalidEnvRef, ValueError)  # callers catching ValueError still do


@given(st.text(max_size=40))
def test_never_crashes_otherwise(text: str) -> None:
    try:
        parse_env_ref(text)
    except ValueError as exc:
        assert str(exc)


AVAILABLE = [
    (Version("1.0.0"), False),
    (Version("1.1.0"), False),
    (Version("1.2.0"), True),  # yanked
    (Version("2.0.0rc1"), False),
]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (None, "1.1.0"),  # latest final, skipping the yanked 1.2.0 and the rc
        ("1.0.0", "1.0.0"),
        ("1.2.0", "1.2.0"),  # an exact pin may pick a yanked version
        ("==1.2.0", "1.2.0"),
        (">=1.0,<2", "1.1.0"),
        (">=2.0.0rc1", "2.0.0rc1"),  # only a pre-release matches
        ("~=1.0", "1.1.0"),
    ],
)
def test_select(spec: str | None, expected: str) -> None:
    assert select_version(AVAILABLE, spec) == Version(expected)


def test_only_prereleases_are_used_when_nothing_else_exists() -> None:
    assert select_version([(Version("0.1a1"), False)], None) == Version("0.1a1")


def test_not_found_lists_available_versions() -> None:
    with pytest.raises(LookupError, match=r"1\.0\.0, 1\.1\.0, 1\.2\.0 \(yanked\), 2\.0\.0rc1"):
        select_version(AVAILABLE, ">=3")
    with pytest.raises(LookupError, match="version 9.9"):
        select_version(AVAILABLE, "9.9")
    with pytest.raises(LookupError, match="nothing has been published"):
        select_version([], None)


def test_latest_and_bad_specs() -> None:
    assert select_version(AVAILABLE, "latest") == Version("1.1.0")
    with pytest.raises(ValueError, match="'>>1' is neither a version nor a version specifier"):
        select_version(AVAILABLE, ">>1")


def test_all_yanked_without_pin_is_not_found() -> None:
    with pytest.raises(LookupError, match="yanked"):
        select_version([(Version("1.0"), True)], None)


def test_latest_is_one_rule_for_install_the_web_page_and_evals() -> None:
    """The issue's case: with 1.0 and 2.0rc1 published, "latest" is 1.0 everywhere."""
    v = Version
    assert latest_version([(v("1.0"), False), (v("2.0rc1"), False)]) == v("1.0")
    assert latest_version([(v("2.0rc1"), False)]) == v("2.0rc1")  # nothing else exists
    assert latest_version([(v("1.0"), True), (v("0.9"), False)]) == v("0.9")
    assert latest_version([(v("1.0"), True)]) is None  # a yanked version needs an exact pin
    assert latest_version([]) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("wordle", (None, "wordle", None)),
        ("Alice/Word_Le@1.0", ("alice", "Word_Le", "1.0")),
        ("alice/wordle@latest", ("alice", "wordle", None)),
    ],
)
def test_env_ids_with_an_optional_owner(
    text: str, expected: tuple[str | None, str, str | None]
) -> None:
    """`prime_env.load` takes the same grammar with the owner optional (an installed env)."""
    assert parse_env_id(text) == expected
