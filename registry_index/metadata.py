"""Core metadata (METADATA / PKG-INFO) read straight out of an archive.

Nothing is extracted to disk: the member is read by exact name from the open archive with a
size cap, then parsed and validated with `packaging.metadata`, so the index stores the very
bytes it serves as the PEP 658 `.metadata` file.
"""

from __future__ import annotations

import tarfile
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from packaging.metadata import Metadata
from packaging.version import Version

from registry_index.bounded_tar import open_tar_gz
from registry_index.errors import InvalidUpload

MAX_METADATA_SIZE = 8 * 1024 * 1024
# What the stdlib archive readers raise on corrupt input (found by fuzzing with mutated
# archives); each is turned into an InvalidUpload so that bad bytes never become a 500.
ARCHIVE_ERRORS: tuple[type[Exception], ...] = (
    zipfile.BadZipFile,
    tarfile.TarError,
    EOFError,
    OSError,
    zlib.error,
    NotImplementedError,
    RuntimeError,
)


@dataclass(frozen=True)
class CoreMetadata:
    """The fields of a distribution's core metadata that an index shows or checks."""

    name: str
    version: Version
    summary: str | None
    description: str | None
    requires_python: str | None
    requires_dist: list[str] = field(default_factory=list)
    license: str | None = None
    keywords: list[str] = field(default_factory=list)
    description_content_type: str | None = None
    raw: bytes = b""


def parse_core_metadata(raw: bytes, source: str) -> CoreMetadata:
    """Parse and validate METADATA/PKG-INFO bytes; `source` names the member in error messages."""
    try:
        meta = Metadata.from_email(raw, validate=True)
    except ExceptionGroup as group:
        problems = "; ".join(str(exc) for exc in group.exceptions[:5])
        raise InvalidUpload(
            f"The core metadata in {source} is invalid ({problems}); fix the fields in "
            "pyproject.toml and rebuild the distribution."
        ) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidUpload(
            f"The core metadata in {source} cannot be read ({exc}); rebuild the distribution "
            "with a standard build backend."
        ) from None
    return CoreMetadata(
        name=meta.name,
        version=meta.version,
        summary=meta.summary,
        description=meta.description,
        requires_python=str(meta.requires_python) if meta.requires_python is not None else None,
        requires_dist=[str(req) for req in meta.requires_dist or []],
        license=meta.license_expression or meta.license,
        keywords=list(meta.keywords or []),
        description_content_type=meta.description_content_type,
        raw=raw,
    )


def read_capped(stream: IO[bytes], limit: int, what: str) -> bytes:
    """Read a whole member, refusing one larger than `limit` without reading past it."""
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise InvalidUpload(
            f"The archive member {what} is larger than {limit // (1024 * 1024)} MiB; shorten "
            "the long description."
        )
    return data


def find_wheel_metadata_member(archive: zipfile.ZipFile) -> str:
    """The single `<name>-<version>.dist-info/METADATA` member of a wheel."""
    candidates = [
        name
        for name in archive.namelist()
        if name.count("/") == 1 and name.endswith(".dist-info/METADATA")
    ]
    if not candidates:
        raise InvalidUpload(
            "The wheel has no '<name>-<version>.dist-info/METADATA' file; build it with a "
            "standard build backend (python -m build)."
        )
    if len(candidates) > 1:
        raise InvalidUpload(
            f"The wheel has more than one .dist-info directory ({', '.join(candidates)}); "
            "a wheel must contain exactly one."
        )
    return candidates[0]


def read_wheel_metadata(path_or_file: str | Path | IO[bytes]) -> CoreMetadata:
    """Read `*.dist-info/METADATA` from a wheel without extracting anything to disk."""
    try:
        with zipfile.ZipFile(path_or_file) as archive:
            member = find_wheel_metadata_member(archive)
            with archive.open(member) as stream:
                raw = read_capped(stream, MAX_METADATA_SIZE, member)
    except ARCHIVE_ERRORS as exc:
        raise InvalidUpload(
            f"The wheel is not a readable zip archive ({exc}); rebuild it and upload again."
        ) from None
    return parse_core_metadata(raw, member)


def read_sdist_metadata(path: str | Path, max_uncompressed: int = 1024**3) -> CoreMetadata:
    """Read `<top>/PKG-INFO` from a .tar.gz sdist, streaming, without extracting anything.

    Only a regular file exactly one directory deep is accepted, so a link or a crafted path
    can never be followed; decompression stops after `max_uncompressed` bytes.
    """
    try:
        with open_tar_gz(path, max_uncompressed) as archive:
            for member in archive:
                parts = member.name.split("/")
                if len(parts) == 2 and parts[1] == "PKG-INFO" and member.isreg():
                    stream = archive.extractfile(member)
                    if stream is None:
                        break
                    raw = read_capped(stream, MAX_METADATA_SIZE, member.name)
                    return parse_core_metadata(raw, member.name)
    except ARCHIVE_ERRORS as exc:
        raise InvalidUpload(
            f"The sdist is not a readable .tar.gz archive ({exc}); rebuild it and upload again."
        ) from None
    raise InvalidUpload(
        "The sdist has no '<name>-<version>/PKG-INFO' file; build it with a standard build "
        "backend (python -m build --sdist)."
    )
