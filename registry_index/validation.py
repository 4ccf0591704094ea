"""Upload validation in the spirit of PyPI's (warehouse `forklift/legacy.py`).

An archive is hostile until proven otherwise. The checks run on the file as stored, before any
row or blob exists: the filename, the byte-level zip framing (so two concatenated archives or
hidden data cannot make different tools see different contents), every member's name and
compression, declared *and* actual sizes while decompressing (zip bombs), the required
`.dist-info` files, and the name and version in the archive's own metadata.
"""

from __future__ import annotations

import base64
import configparser
import csv
import hashlib
import io
import posixpath
import tarfile
import zipfile
from dataclasses import dataclass
from email.parser import BytesHeaderParser
from email.policy import compat32
from pathlib import Path, PurePosixPath
from typing import IO

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from registry_index.bounded_tar import open_tar_gz
from registry_index.errors import InvalidUpload
from registry_index.filenames import DistFilename, has_control_chars, parse_filename
from registry_index.metadata import (
    ARCHIVE_ERRORS,
    MAX_METADATA_SIZE,
    CoreMetadata,
    parse_core_metadata,
    read_capped,
)
from registry_index.names import normalize
from registry_index.zipframing import check_zip_framing

MiB = 1024 * 1024
_CHUNK = 64 * 1024


@dataclass(frozen=True)
class UploadLimits:
    """Size limits; the ratio limits apply only above `ratio_min_size` (text compresses well)."""

    max_file_size: int = 100 * MiB
    max_uncompressed_size: int = 1024 * MiB
    max_member_ratio: float = 50.0
    max_total_ratio: float = 50.0
    ratio_min_size: int = 16 * MiB
    max_members: int = 10_000


DEFAULT_LIMITS = UploadLimits()


@dataclass(frozen=True)
class ValidatedDistribution:
    """What the index stores about an accepted file."""

    filename: DistFilename
    metadata: CoreMetadata
    sha256: str
    blake2_256: str
    size: int
    metadata_sha256: str | None  # PEP 658: served as `<file>.metadata` (wheels only)


def _mib(size: int) -> str:
    return f"{size / MiB:.1f} MiB"


def _open(source: Path | bytes) -> IO[bytes]:
    """The upload for reading: a file, or bytes a server kept in memory (a small upload is
    checked without writing a scratch file first)."""
    return io.BytesIO(source) if isinstance(source, bytes) else source.open("rb")


def _hash_file(source: Path | bytes) -> tuple[str, str]:
    sha = hashlib.sha256()
    blake = hashlib.blake2b(digest_size=32)
    with _open(source) as handle:
        while chunk := handle.read(1024 * 1024):
            sha.update(chunk)
            blake.update(chunk)
    return sha.hexdigest(), blake.hexdigest()


def check_member_name(name: str, archive: str) -> PurePosixPath:
    """Refuse member names that are empty, absolute, escaping, or unprintable."""
    if not name or name in {"/", "."}:
        raise InvalidUpload(f"The {archive} contains a member with an empty name; rebuild it.")
    if has_control_chars(name):
        raise InvalidUpload(
            f"The {archive} contains a member name with control characters ({name!r}); rebuild it."
        )
    if "\\" in name:
        raise InvalidUpload(
            f"The {archive} member {name!r} uses a backslash; archive paths must use '/'."
        )
    path = PurePosixPath(name)
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise InvalidUpload(
            f"The {archive} member {name!r} has an absolute path; members must be relative."
        )
    if ".." in path.parts:
        raise InvalidUpload(
            f"The {archive} member {name!r} contains '..' (path traversal); members must stay "
            "inside the archive."
        )
    return path


def _check_ratio(limits: UploadLimits, what: str, size: int, compressed: int, limit: float) -> None:
    if size > limits.ratio_min_size and size > limit * max(compressed, 1):
        raise InvalidUpload(
            f"{what} expands {size / max(compressed, 1):.0f}x ({_mib(size)} from "
            f"{_mib(compressed)}), more than the {limit:.0f}x allowed; this looks like a zip "
            "bomb. Upload a distribution without highly compressible padding."
        )


def _check_total(limits: UploadLimits, total: int, archive: str) -> None:
    if total > limits.max_uncompressed_size:
        raise InvalidUpload(
            f"The {archive} unpacks to more than {_mib(limits.max_uncompressed_size)}, the "
            "limit for one distribution; make it smaller."
        )


# --- wheels -------------------------------------------------------------------------------


def _validate_wheel_members(archive: zipfile.ZipFile, limits: UploadLimits, size: int) -> None:
    infos = archive.infolist()
    if len(infos) > limits.max_members:
        raise InvalidUpload(
            f"The wheel has {len(infos)} members, more than the {limits.max_members} allowed."
        )
    seen: set[str] = set()
    declared_total = 0
    for info in infos:
        # Compare normalised paths: 'a//b', 'a/./b' and the directory 'a/b/' all land on 'a/b'.
        key = check_member_name(info.filename, "wheel").as_posix()
        if key in seen:
            raise InvalidUpload(
                f"The wheel contains {info.filename!r} twice; duplicate members let tools see "
                "different files. Rebuild the wheel."
            )
        seen.add(key)
        if info.flag_bits & 0x1:
            raise InvalidUpload(f"The wheel member {info.filename!r} is encrypted; rebuild it.")
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise InvalidUpload(
                f"The wheel member {info.filename!r} uses an unsupported compression method "
                f"({info.compress_type}); wheels may only use stored or deflated members."
            )
        _check_ratio(
            limits, f"Member {info.filename!r}", info.file_size, info.compress_size,
            limits.max_member_ratio,
        )  # fmt: skip
        declared_total += info.file_size
    _check_total(limits, declared_total, "wheel")
    _check_ratio(limits, "The wheel", declared_total, size, limits.max_total_ratio)


def _read_member_hashed(
    archive: zipfile.ZipFile, info: zipfile.ZipInfo, budget: int
) -> tuple[int, str]:
    """Decompress one member fully (verifying its CRC), counting actual bytes against `budget`."""
    sha = hashlib.sha256()
    actual = 0
    with archive.open(info) as stream:
        while chunk := stream.read(_CHUNK):
            actual += len(chunk)
            if actual > info.file_size or actual > budget:
                raise InvalidUpload(
                    f"The wheel member {info.filename!r} decompresses to more than its header "
                    "declares or than the size limit allows; this looks like a zip bomb."
                )
            sha.update(chunk)
    if actual != info.file_size:
        raise InvalidUpload(f"The wheel member {info.filename!r} is truncated; rebuild the wheel.")
    # RECORD's hash encoding: urlsafe base64 without padding (PEP 376/427).
    return actual, base64.urlsafe_b64encode(sha.digest()).rstrip(b"=").decode("ascii")


def _parse_record(raw: bytes, record_name: str) -> dict[str, tuple[str, str]]:
    try:
        rows = list(csv.reader(io.StringIO(raw.decode("utf-8"))))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise InvalidUpload(
            f"The wheel's {record_name} cannot be parsed ({exc}); rebuild the wheel."
        ) from None
    entries: dict[str, tuple[str, str]] = {}
    for row in rows:
        if not row:
            continue
        if len(row) != 3:
            raise InvalidUpload(
                f"The wheel's {record_name} has a malformed line {','.join(row)!r}; each line "
                "must be "
                "'path,hash,size'. Rebuild the wheel."
            )
        entries[row[0]] = (row[1], row[2])
    return entries


def _check_dist_info(archive: zipfile.ZipFile, parsed: DistFilename) -> str:
    """Return the dist-info directory after checking it matches the filename and is complete."""
    dist_infos = {
        name.split("/", 1)[0]
        for name in archive.namelist()
        if "/" in name and name.split("/", 1)[0].endswith(".dist-info")
    }
    if len(dist_infos) != 1:
        found = ", ".join(sorted(dist_infos)) or "none"
        raise InvalidUpload(
            f"A wheel must contain exactly one top-level .dist-info directory (found: {found}); "
            "build it with a standard build backend (python -m build)."
        )
    dist_info = dist_infos.pop()
    stem = dist_info.removesuffix(".dist-info")
    name_part, _, version_part = stem.rpartition("-")
    if normalize(name_part) != parsed.name or not _same_version(version_part, parsed.version):
        raise InvalidUpload(
            f"The wheel's metadata directory {dist_info!r} does not match its filename "
            f"{parsed.filename!r}; rebuild the wheel instead of renaming it."
        )
    names = set(archive.namelist())
    for required in ("WHEEL", "METADATA", "RECORD"):
        if f"{dist_info}/{required}" not in names:
            raise InvalidUpload(
                f"The wheel is missing {dist_info}/{required}; build it with a standard build "
                "backend (python -m build)."
            )
    return dist_info


def _same_version(text: str, version: Version) -> bool:
    """Equal as PEP 440 versions (`1.0` and `1.0.0` differ in spelling only, so they match)."""
    try:
        return Version(text) == version
    except InvalidVersion:
        return False


def _check_wheel_file(raw: bytes, member: str) -> None:
    meta = parse_email_headers(raw, member)
    version = meta.get("Wheel-Version", "")
    if not version.startswith("1."):
        raise InvalidUpload(
            f"The wheel's {member} declares Wheel-Version {version or '(missing)'!r}; this "
            "index accepts "
            "wheel format 1.x."
        )


def _check_entry_points(raw: bytes, member: str) -> None:
    """entry_points.txt must parse: it is how `prime_env.load` finds an environment."""
    parser = configparser.ConfigParser(delimiters=("=",), interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    try:
        parser.read_string(raw.decode("utf-8"), source=member)
    except (configparser.Error, UnicodeDecodeError) as exc:
        message = str(exc).splitlines()[0]
        raise InvalidUpload(
            f"The wheel's {member} cannot be parsed ({message}); fix the entry points in "
            "pyproject.toml and rebuild the wheel."
        ) from None


def parse_email_headers(raw: bytes, member: str) -> dict[str, str]:
    """Parse an RFC 822 style file (WHEEL) into a dict of its first values."""
    try:
        message = BytesHeaderParser(policy=compat32).parsebytes(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidUpload(
            f"The wheel's {member} cannot be parsed ({exc}); rebuild the wheel."
        ) from None
    return {key: str(value) for key, value in message.items()}


def _validate_wheel(
    source: Path | bytes, parsed: DistFilename, limits: UploadLimits, size: int
) -> bytes:
    """Return the METADATA bytes of a wheel that passed every check."""
    with _open(source) as handle:
        check_zip_framing(handle, size)
        try:
            archive = zipfile.ZipFile(handle)
        except ARCHIVE_ERRORS as exc:
            raise InvalidUpload(
                f"The wheel is not a valid zip archive ({exc}); rebuild it and upload again."
            ) from None
        with archive:
            _validate_wheel_members(archive, limits, size)
            dist_info = _check_dist_info(archive, parsed)
            record_name = f"{dist_info}/RECORD"
            hashes: dict[str, tuple[int, str]] = {}
            budget = limits.max_uncompressed_size
            metadata_raw = b""
            try:
                for info in archive.infolist():
                    if info.is_dir():
                        continue
                    actual, digest = _read_member_hashed(archive, info, budget)
                    budget -= actual
                    hashes[info.filename] = (actual, digest)
                with archive.open(f"{dist_info}/METADATA") as stream:
                    metadata_raw = read_capped(stream, MAX_METADATA_SIZE, f"{dist_info}/METADATA")
                with archive.open(f"{dist_info}/WHEEL") as stream:
                    _check_wheel_file(read_capped(stream, 1 * MiB, "WHEEL"), f"{dist_info}/WHEEL")
                with archive.open(record_name) as stream:
                    record = _parse_record(read_capped(stream, 64 * MiB, record_name), record_name)
                entry_points = f"{dist_info}/entry_points.txt"
                if entry_points in hashes:
                    with archive.open(entry_points) as stream:
                        _check_entry_points(
                            read_capped(stream, 1 * MiB, entry_points), entry_points
                        )
            except ARCHIVE_ERRORS as exc:
                raise InvalidUpload(
                    f"The wheel is corrupt ({exc}); rebuild it and upload again."
                ) from None
    _check_record(record, hashes, record_name)
    return metadata_raw


def _check_record(
    record: dict[str, tuple[str, str]], hashes: dict[str, tuple[int, str]], record_name: str
) -> None:
    """Every file must be listed in RECORD with its true sha256 and size (RECORD itself aside)."""
    for member, (size, digest) in hashes.items():
        if member == record_name or member.endswith(
            (".dist-info/RECORD.jws", ".dist-info/RECORD.p7s")
        ):
            continue
        entry = record.get(member)
        if entry is None:
            raise InvalidUpload(
                f"{member!r} is in the wheel but not listed in {record_name}; rebuild the wheel."
            )
        algorithm, _, expected = entry[0].partition("=")
        if algorithm != "sha256" or expected != digest or (entry[1] and entry[1] != str(size)):
            raise InvalidUpload(
                f"{member!r} does not match its hash or size in {record_name}; the wheel was "
                "modified after it was built. Rebuild it."
            )
    for member in record:
        if member not in hashes and not member.endswith("/"):
            raise InvalidUpload(
                f"The wheel's {record_name} lists {member!r}, which is not in the wheel; "
                "rebuild the wheel."
            )


# --- sdists --------------------------------------------------------------------------------


def _sdist_top(parsed: DistFilename) -> str:
    return parsed.filename.removesuffix(".tar.gz")


def _check_sdist_member(member: tarfile.TarInfo, top: str) -> None:
    path = check_member_name(member.name.rstrip("/") or member.name, "sdist")
    if path.parts[0] != top:
        raise InvalidUpload(
            f"The sdist member {member.name!r} is outside the top-level directory {top!r}; an "
            "sdist must unpack into one '<name>-<version>/' directory."
        )
    if member.issym() or member.islnk():
        # Symlink targets are relative to the link's directory, hard links to the archive root.
        base = str(path.parent) if member.issym() else ""
        target = posixpath.normpath(posixpath.join(base, member.linkname))
        if member.linkname.startswith("/") or not target.startswith(f"{top}/"):
            raise InvalidUpload(
                f"The sdist link {member.name!r} points outside its top-level directory "
                f"({member.linkname!r}); replace the link with the file itself."
            )
        return
    if not (member.isreg() or member.isdir()):
        raise InvalidUpload(
            f"The sdist member {member.name!r} is a device or FIFO; an sdist may hold only "
            "regular files, directories and links."
        )
    sparse = getattr(member, "sparse", None)  # set by tarfile for GNU sparse members
    if member.type == tarfile.GNUTYPE_SPARSE or sparse is not None:
        raise InvalidUpload(
            f"The sdist member {member.name!r} is a sparse file; rebuild the sdist."
        )


def _validate_sdist(
    source: Path | bytes, parsed: DistFilename, limits: UploadLimits, size: int
) -> bytes:
    """Return the PKG-INFO bytes of an sdist that passed every check."""
    top = _sdist_top(parsed)
    # The ratio limit only bites above ratio_min_size: small text archives compress very well.
    budget = _expansion_budget(limits, size)
    pkg_info: bytes | None = None
    seen: set[str] = set()
    count = 0
    try:
        with open_tar_gz(source, budget) as archive:
            for member in archive:
                count += 1
                if count > limits.max_members:
                    raise InvalidUpload(
                        f"The sdist has more than {limits.max_members} members; make it smaller."
                    )
                name = member.name.rstrip("/")
                if name in seen:
                    raise InvalidUpload(f"The sdist contains {name!r} twice; rebuild it.")
                seen.add(name)
                _check_sdist_member(member, top)
                if name == f"{top}/PKG-INFO" and member.isreg():
                    handle = archive.extractfile(member)
                    if handle is not None:
                        pkg_info = read_capped(handle, MAX_METADATA_SIZE, name)
    except ARCHIVE_ERRORS as exc:
        raise InvalidUpload(
            f"The sdist is not a valid .tar.gz archive ({exc}); rebuild it with "
            "python -m build --sdist."
        ) from None
    if pkg_info is None:
        raise InvalidUpload(
            f"The sdist has no {top}/PKG-INFO; build it with a standard build backend "
            "(python -m build --sdist)."
        )
    return pkg_info


# --- source archives ------------------------------------------------------------------------


def _expansion_budget(limits: UploadLimits, size: int) -> int:
    """Decompressed bytes allowed for a compressed archive of `size` bytes."""
    return min(
        limits.max_uncompressed_size, max(limits.ratio_min_size, int(size * limits.max_total_ratio))
    )


def validate_source_archive(
    path: Path, filename: str, limits: UploadLimits = DEFAULT_LIMITS
) -> None:
    """Raise `InvalidUpload` unless `path` is a safe `.tar.gz` source archive.

    The source archive of `prime env push` (a gzip tar of the environment tree, any top-level
    layout) is unpacked by `prime env pull` on users' machines, so the hub checks it at upload
    and the CLI checks it again before extracting (a hub may be hostile): bounded size, member
    count and decompressed bytes (counted while decompressing, so padding between members
    counts too), and only regular files and directories with relative, non-escaping names.
    """
    if not filename.endswith(".tar.gz") or "/" in filename or "\\" in filename:
        raise InvalidUpload(
            f"{filename!r} is not a valid source archive name; use NAME-VERSION-HASH.tar.gz."
        )
    size = path.stat().st_size
    if size > limits.max_file_size:
        raise InvalidUpload(
            f"The source archive is larger than the {_mib(limits.max_file_size)} limit; "
            "leave data files and build outputs out of the environment directory."
        )
    count = 0
    try:
        with open_tar_gz(path, _expansion_budget(limits, size), "source archive") as archive:
            for member in archive:
                count += 1
                if count > limits.max_members:
                    raise InvalidUpload(
                        f"The source archive has more than {limits.max_members} files; leave "
                        "data files and build outputs out of the environment directory."
                    )
                check_member_name(member.name.rstrip("/") or member.name, "source archive")
                if not (member.isreg() or member.isdir()):
                    raise InvalidUpload(
                        f"The source archive member {member.name!r} is a link or special file; "
                        "only regular files and directories are allowed."
                    )
    except ARCHIVE_ERRORS as exc:
        raise InvalidUpload(
            f"The source archive is not a valid .tar.gz ({exc}); create it with `prime env push`."
        ) from None


# --- entry point ---------------------------------------------------------------------------


def _check_metadata_matches(parsed: DistFilename, metadata: CoreMetadata) -> None:
    if normalize(metadata.name) != parsed.name:
        raise InvalidUpload(
            f"The filename {parsed.filename!r} says the project is {parsed.name!r} but its "
            f"metadata says {metadata.name!r}; rebuild the distribution instead of renaming it."
        )
    if metadata.version != parsed.version:
        raise InvalidUpload(
            f"The filename {parsed.filename!r} says version {parsed.version} but its metadata "
            f"says {metadata.version}; rebuild the distribution instead of renaming it."
        )


def check_requirements(metadata: CoreMetadata, filename: str) -> None:
    """Refuse a `Requires-Dist` with a direct URL (`name @ https://…`, `@ file://…`, `@ git+…`).

    PyPI refuses them too: an index is where names are resolved, and a URL dependency would make
    every installer fetch (and, for a source tree, build and run) whatever that URL serves,
    outside the index's checks and the user's choice of index.
    """
    for text in metadata.requires_dist:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:  # packaging's validation already refused these
            continue
        if requirement.url:
            raise InvalidUpload(
                f"The distribution {filename!r} declares a direct URL dependency {text!r}; an "
                "index refuses those (installing it would fetch and run code from that URL). "
                "Depend on "
                f"{requirement.name!r} by name and version instead (publish it to a package "
                "index or to this hub) and rebuild."
            )


def validate_distribution(
    source: Path | bytes, filename: str, limits: UploadLimits = DEFAULT_LIMITS
) -> ValidatedDistribution:
    """Validate an uploaded file, stored at `source` or held as the bytes `source`, under the
    client's `filename`. The checks are the same either way.

    Raises `InvalidUpload` with a user-facing sentence on the first problem found.
    """
    parsed = parse_filename(filename)
    size = len(source) if isinstance(source, bytes) else source.stat().st_size
    if size > limits.max_file_size:
        raise InvalidUpload(
            f"{filename!r} is {_mib(size)}, larger than the {_mib(limits.max_file_size)} limit; "
            "make the distribution smaller."
        )
    if size == 0:
        raise InvalidUpload(f"The file {filename!r} is empty; upload the built distribution file.")
    if parsed.kind == "wheel":
        raw = _validate_wheel(source, parsed, limits, size)
        member = f"{filename} (METADATA)"
    else:
        raw = _validate_sdist(source, parsed, limits, size)
        member = f"{filename} (PKG-INFO)"
    if b"\x00" in raw:
        # packaging accepts one (in Summary or Keywords, say), but no field may hold it and a
        # database text column (PostgreSQL) cannot store it.
        raise InvalidUpload(
            f"The core metadata in {member} contains a NUL byte; remove it from the fields in "
            "pyproject.toml and rebuild the distribution."
        )
    metadata = parse_core_metadata(raw, member)
    _check_metadata_matches(parsed, metadata)
    check_requirements(metadata, filename)
    sha256, blake2_256 = _hash_file(source)
    return ValidatedDistribution(
        filename=parsed,
        metadata=metadata,
        sha256=sha256,
        blake2_256=blake2_256,
        size=size,
        metadata_sha256=hashlib.sha256(raw).hexdigest() if parsed.kind == "wheel" else None,
    )
