"""Checks for the source archive of `prime env push` (a gzip tar of the environment tree).

It is not an sdist (no PKG-INFO, any top-level layout), but `prime env pull` unpacks it on
users' machines, so it gets the same hostility checks: bounded size and expansion, and only
regular files and directories with relative, non-escaping names.
"""

from __future__ import annotations

import gzip
import tarfile
import zlib
from pathlib import Path

from registry_index.errors import InvalidUpload
from registry_index.validation import UploadLimits, check_member_name


def validate_source_archive(path: Path, filename: str, limits: UploadLimits) -> None:
    """Raise `InvalidUpload` unless `path` is a safe `.tar.gz` source archive."""
    if not filename.endswith(".tar.gz") or "/" in filename or "\\" in filename:
        raise InvalidUpload(
            f"{filename!r} is not a valid source archive name; use NAME-VERSION-HASH.tar.gz."
        )
    size = path.stat().st_size
    if size > limits.max_file_size:
        raise InvalidUpload(
            f"The source archive is larger than the {limits.max_file_size // 2**20} MiB limit; "
            "leave data files and build outputs out of the environment directory."
        )
    budget = min(
        limits.max_uncompressed_size, max(limits.ratio_min_size, int(size * limits.max_total_ratio))
    )
    total = 0
    count = 0
    try:
        with tarfile.open(path, mode="r:gz") as archive:
            for member in archive:
                count += 1
                if count > limits.max_members:
                    raise InvalidUpload(
                        f"The source archive has more than {limits.max_members} files."
                    )
                check_member_name(member.name.rstrip("/") or member.name, "source archive")
                if not (member.isreg() or member.isdir()):
                    raise InvalidUpload(
                        f"The source archive member {member.name!r} is a link or special file; "
                        "only regular files and directories are allowed."
                    )
                total += member.size
                if total > budget:
                    raise InvalidUpload(
                        "The source archive unpacks to far more than its size (a compression "
                        "bomb?); make it smaller."
                    )
    except (tarfile.TarError, EOFError, OSError, gzip.BadGzipFile, zlib.error) as exc:
        raise InvalidUpload(
            f"The source archive is not a valid .tar.gz ({exc}); create it with `prime env push`."
        ) from None
