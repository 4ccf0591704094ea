"""Distribution filenames: wheels (PEP 427/491) and sdists (PEP 625).

The filename is the only user-chosen string that ends up in a storage path and a URL, so it is
checked strictly before anything else: no separators, no control characters, a parseable name
and version, no local version (`+abc`, which an index must not host), and wheel tags that an
installer can actually match (the platform tags PyPI accepts).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from packaging.tags import Tag
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import Version

from registry_index.errors import InvalidUpload

MAX_FILENAME_LENGTH = 255
_INTERPRETER = re.compile(r"^(py|cp|pp|ip|jy|graalpy)\d*[a-z0-9]*$")
_ABI = re.compile(r"^[a-z0-9_]+$")
# C0 controls and DEL: never valid in a filename or archive member name.
has_control_chars = re.compile(r"[\x00-\x1f\x7f]").search

_PLAIN_PLATFORMS = frozenset(
    {
        "any", "win32", "win_amd64", "win_arm64", "win_ia64",
        "manylinux1_x86_64", "manylinux1_i686",
        "manylinux2010_x86_64", "manylinux2010_i686",
        "linux_armv6l", "linux_armv7l",
    }
)  # fmt: skip
_LINUX_ARCHES = frozenset(
    {"x86_64", "i686", "aarch64", "armv7l", "ppc64", "ppc64le", "s390x", "riscv64", "loongarch64"}
)
_MACOS_ARCHES = frozenset(
    {"ppc", "ppc64", "i386", "x86_64", "arm64", "intel", "fat", "fat3", "fat64", "universal",
     "universal2"}
)  # fmt: skip
_VERSIONED_PLATFORMS: tuple[tuple[re.Pattern[str], frozenset[str]], ...] = (
    (re.compile(r"^manylinux2014_(?P<arch>.+)$"), _LINUX_ARCHES),
    (re.compile(r"^manylinux_\d+_\d+_(?P<arch>.+)$"), _LINUX_ARCHES),
    (re.compile(r"^musllinux_\d+_\d+_(?P<arch>.+)$"), _LINUX_ARCHES),
    (re.compile(r"^macosx_(?:10|1[1-9]|2\d)_\d+_(?P<arch>.+)$"), _MACOS_ARCHES),
    (re.compile(r"^ios_\d+_\d+_(?P<arch>.+)_iphone(?:os|simulator)$"),
     frozenset({"arm64", "x86_64"})),
    (re.compile(r"^android_\d+_(?P<arch>.+)$"),
     frozenset({"armeabi_v7a", "arm64_v8a", "x86", "x86_64"})),
    (re.compile(r"^(?:pyodide|pyemscripten)_\d+_\d+_(?P<arch>.+)$"), frozenset({"wasm32"})),
)  # fmt: skip


@dataclass(frozen=True)
class DistFilename:
    """A parsed, validated distribution filename."""

    filename: str
    name: str  # PEP 503-normalised
    version: Version
    kind: Literal["wheel", "sdist"]
    tags: frozenset[Tag] = field(default_factory=frozenset)


def check_filename_characters(filename: str) -> None:
    """Refuse names that could escape a directory, confuse a terminal, or break a URL."""
    if not filename:
        raise InvalidUpload("The upload has no filename; send the distribution file as 'content'.")
    if "/" in filename or "\\" in filename:
        raise InvalidUpload(
            f"Invalid filename {filename!r}: it contains a path separator; upload the file under "
            "its bare name (for example 'pkg-1.0-py3-none-any.whl')."
        )
    if has_control_chars(filename):
        raise InvalidUpload(
            f"Invalid filename {filename!r}: it contains control characters; rebuild the "
            "distribution so its filename is plain text."
        )
    if len(filename) > MAX_FILENAME_LENGTH:
        raise InvalidUpload(
            f"Invalid filename: it is {len(filename)} characters long; use at most "
            f"{MAX_FILENAME_LENGTH}."
        )


def is_valid_platform_tag(platform: str) -> bool:
    """True for the platform tags PyPI accepts (warehouse `_valid_platform_tag`)."""
    if platform in _PLAIN_PLATFORMS:
        return True
    for pattern, arches in _VERSIONED_PLATFORMS:
        match = pattern.match(platform)
        if match is not None:
            return match.group("arch") in arches
    return False


def _check_tags(filename: str, tags: frozenset[Tag]) -> None:
    for tag in sorted(tags, key=str):
        if _INTERPRETER.match(tag.interpreter) is None:
            raise InvalidUpload(
                f"Invalid wheel filename {filename!r}: {tag.interpreter!r} is not a Python tag "
                "(expected e.g. 'py3' or 'cp311'); rebuild the wheel with a standard build backend."
            )
        if _ABI.match(tag.abi) is None:
            raise InvalidUpload(
                f"Invalid wheel filename {filename!r}: {tag.abi!r} is not an ABI tag "
                "(expected e.g. 'none' or 'cp311'); rebuild the wheel with a standard build "
                "backend."
            )
        if not is_valid_platform_tag(tag.platform):
            raise InvalidUpload(
                f"Binary wheel {filename!r} has an unsupported platform tag {tag.platform!r}; "
                "use 'any' for pure-Python wheels, or a manylinux/musllinux/macosx/win tag."
            )


def _reject_local(filename: str, version: Version) -> None:
    if version.local is not None:
        raise InvalidUpload(
            f"{filename!r} has the local version {str(version)!r}; an index cannot host local "
            f"versions (the '+{version.local}' part). Publish '{version.public}' or another "
            "public version instead."
        )


def parse_filename(filename: str) -> DistFilename:
    """Parse and validate a wheel or sdist filename, raising `InvalidUpload` on anything odd."""
    check_filename_characters(filename)
    if filename.endswith(".whl"):
        try:
            name, version, _build, tags = parse_wheel_filename(filename)
        except InvalidWheelFilename as exc:
            raise InvalidUpload(
                f"Invalid wheel filename {filename!r}: {exc}. Expected "
                "'{name}-{version}(-{build})?-{python}-{abi}-{platform}.whl'."
            ) from None
        _reject_local(filename, version)
        _check_tags(filename, tags)
        return DistFilename(filename, str(name), version, "wheel", tags)
    if filename.endswith(".tar.gz"):
        try:
            name, version = parse_sdist_filename(filename)
        except InvalidSdistFilename as exc:
            raise InvalidUpload(
                f"Invalid sdist filename {filename!r}: {exc}. Expected "
                "'{name}-{version}.tar.gz'."
            ) from None
        _reject_local(filename, version)
        return DistFilename(filename, str(name), version, "sdist")
    raise InvalidUpload(
        f"Invalid distribution filename {filename!r}: only wheels ('.whl') and source "
        "distributions ('.tar.gz') can be uploaded."
    )
