"""Robustness: arbitrary input yields a result or an InvalidUpload, never another exception
(which the hub would turn into a 500)."""

from __future__ import annotations

import tarfile
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from registry_index.errors import InvalidUpload
from registry_index.filenames import parse_filename
from registry_index.simple import negotiate
from registry_index.validation import validate_distribution
from tests.registry_index.wheelmaker import make_sdist, make_wheel

_WORK = Path(tempfile.mkdtemp(prefix="registry-fuzz-"))
VALID_WHEEL = make_wheel(_WORK).read_bytes()
VALID_SDIST = make_sdist(_WORK).read_bytes()
WHEEL = "demo_env-1.0.0-py3-none-any.whl"
SDIST = "demo_env-1.0.0.tar.gz"


@given(st.text(max_size=80))
def test_parse_filename_only_raises_invalid_upload(filename: str) -> None:
    try:
        parse_filename(filename)
    except InvalidUpload as exc:
        assert str(exc)


@given(st.text(max_size=120))
def test_negotiate_never_raises(accept: str) -> None:
    result = negotiate(accept)
    assert result is None or result[0] in ("html", "json")


def _mutations(valid: bytes) -> st.SearchStrategy[bytes]:
    flips = st.lists(
        st.tuples(st.integers(0, len(valid) - 1), st.integers(0, 255)), min_size=1, max_size=8
    )

    def apply(changes: list[tuple[int, int]]) -> bytes:
        data = bytearray(valid)
        for position, value in changes:
            data[position] = value
        return bytes(data)

    cuts = st.integers(0, len(valid)).map(lambda n: valid[:n])
    return st.one_of(flips.map(apply), cuts, st.binary(max_size=300).map(lambda b: valid + b))


def _check(data: bytes, filename: str) -> None:
    with tempfile.TemporaryDirectory(dir=_WORK) as tmp:
        path = Path(tmp) / filename
        path.write_bytes(data)
        try:
            validate_distribution(path, filename)
        except InvalidUpload as exc:
            assert str(exc)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mutations(VALID_WHEEL))
def test_mutated_wheels_are_accepted_or_refused_cleanly(data: bytes) -> None:
    _check(data, WHEEL)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mutations(VALID_SDIST))
def test_mutated_sdists_are_accepted_or_refused_cleanly(data: bytes) -> None:
    _check(data, SDIST)


def test_sdist_fixture_is_a_tarball() -> None:
    assert tarfile.is_tarfile(_WORK / SDIST)
