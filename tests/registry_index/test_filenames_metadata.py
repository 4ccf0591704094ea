"""Filename parsing and core-metadata extraction (from files and open streams)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest
from packaging.version import Version

from registry_index.errors import InvalidUpload
from registry_index.filenames import is_valid_platform_tag, parse_filename
from registry_index.metadata import read_sdist_metadata, read_wheel_metadata
from tests.registry_index.wheelmaker import make_sdist, make_wheel


def test_parse_wheel_and_sdist() -> None:
    wheel = parse_filename("Wiki_Search-1.2.0-1-cp311-cp311-manylinux_2_17_x86_64.whl")
    assert (wheel.name, wheel.version, wheel.kind) == ("wiki-search", Version("1.2.0"), "wheel")
    assert {str(tag) for tag in wheel.tags} == {"cp311-cp311-manylinux_2_17_x86_64"}
    sdist = parse_filename("wiki_search-1.2.0.tar.gz")
    assert (sdist.name, sdist.kind, sdist.tags) == ("wiki-search", "sdist", frozenset())


@pytest.mark.parametrize(
    "tag",
    ["any", "win_amd64", "manylinux2014_aarch64", "musllinux_1_2_x86_64", "macosx_11_0_arm64",
     "macosx_10_9_universal2", "ios_13_0_arm64_iphoneos", "android_21_arm64_v8a",
     "pyodide_2024_0_wasm32"],
)  # fmt: skip
def test_platform_tags_pypi_accepts(tag: str) -> None:
    assert is_valid_platform_tag(tag)


@pytest.mark.parametrize(
    "tag", ["linux_x86_64", "manylinux_2_17_sparc", "macosx_9_0_x86_64", "freebsd_13_amd64", ""]
)
def test_platform_tags_refused(tag: str) -> None:
    assert not is_valid_platform_tag(tag)


def test_compressed_tag_sets() -> None:
    parsed = parse_filename("x-1.0-py2.py3-none-any.whl")
    assert {str(tag) for tag in parsed.tags} == {"py2-none-any", "py3-none-any"}
    with pytest.raises(InvalidUpload, match="unsupported platform tag 'bogus'"):
        parse_filename("x-1.0-py3-none-any.bogus.whl")


def test_read_wheel_metadata_from_path_and_stream(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path)
    from_path = read_wheel_metadata(wheel)
    from_stream = read_wheel_metadata(io.BytesIO(wheel.read_bytes()))
    assert from_path == from_stream
    assert from_path.name == "demo_env" and from_path.summary == "demo env"
    assert from_path.raw.startswith(b"Metadata-Version: 2.1")
    assert list(tmp_path.iterdir()) == [wheel]  # nothing extracted


def test_read_sdist_metadata(tmp_path: Path) -> None:
    meta = read_sdist_metadata(make_sdist(tmp_path))
    assert meta.version == Version("1.0.0") and meta.requires_python == ">=3.9"


def test_unreadable_archives(tmp_path: Path) -> None:
    junk = tmp_path / "x-1.0-py3-none-any.whl"
    junk.write_bytes(b"not a zip")
    with pytest.raises(InvalidUpload, match="not a readable zip archive"):
        read_wheel_metadata(junk)
    with pytest.raises(InvalidUpload, match="not a readable .tar.gz"):
        read_sdist_metadata(junk)
    with pytest.raises(InvalidUpload, match="has no '<name>-<version>/PKG-INFO'"):
        read_sdist_metadata(make_sdist(tmp_path, pkg_info=False))


def test_read_sdist_metadata_stops_at_the_decompression_budget(tmp_path: Path) -> None:
    sdist = tmp_path / "demo_env-1.0.0.tar.gz"
    padding = tarfile.TarInfo("demo_env-1.0.0/zeros.bin")
    padding.size = 4 * 1024 * 1024
    with tarfile.open(sdist, "w:gz") as archive:
        archive.addfile(padding, io.BytesIO(bytes(padding.size)))
    with pytest.raises(InvalidUpload, match="compression bomb"):
        read_sdist_metadata(sdist, max_uncompressed=1024 * 1024)
